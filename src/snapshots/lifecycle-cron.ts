// The snapshot lifecycle's cron trigger (wrangler.jsonc "triggers"): hourly, expiries and retention policies are
// applied (retention.ts), and multipart uploads no running backup owns are aborted (store/sweep-uploads.ts).
// worker.ts's scheduled handler dispatches on the cron expression; the local stack fires it once when it starts,
// so what a stopped stack left open is swept then too.
import { depsFrom } from "../deps.ts";
import { runState } from "../runs/run-liveness.ts";
import { sweepUploads, type UploadSweep } from "../store/sweep-uploads.ts";
import { applyRetention, type RetentionReport } from "./retention.ts";

export { LIFECYCLE_CRON } from "./lifecycle-schedule.ts";

/** `when` is the trigger's scheduled time: expiries are judged against it. */
export async function runLifecycle(env: Env, when: Date): Promise<RetentionReport & { uploads: UploadSweep }> {
  const d = depsFrom(env);
  const uploads = await sweepUploads(d, (snapshotId) => runState(env, "backup", snapshotId));
  if (uploads.aborted.length) console.log(`sweep: aborted ${uploads.aborted.length} multipart uploads` + uploads.aborted.map((u) => `\n  ${u.key} (${u.why})`).join(""));
  return { ...(await applyRetention(d, when)), uploads };
}
