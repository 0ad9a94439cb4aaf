// The snapshot lifecycle's cron trigger (wrangler.jsonc "triggers"): hourly, expiries and retention policies are
// applied (retention.ts), chunks no index references any more are collected (chunk-gc.ts, with its default
// grace period), and packs no record names (pack-gc.ts), over one listing (collect-store.ts), and multipart uploads no running backup owns are aborted (store/sweep-uploads.ts). worker.ts's
// scheduled handler dispatches on the cron expression; the local stack fires it once when it starts, so what a
// stopped stack left open is swept then too.
import type { ChunkGcReport } from "../chunks/chunk-gc.ts";
import { collectStore } from "../chunks/collect-store.ts";
import type { PackGcReport } from "../chunks/pack-gc.ts";
import { depsFrom } from "../deps.ts";
import { runState } from "../runs/run-liveness.ts";
import { sweepUploads, type UploadSweep } from "../store/sweep-uploads.ts";
import { applyRetention, type RetentionReport } from "./retention.ts";

export { LIFECYCLE_CRON } from "./lifecycle-schedule.ts";

/** `when` is the trigger's scheduled time: expiries are judged against it. */
export async function runLifecycle(env: Env, when: Date): Promise<RetentionReport & { chunks: ChunkGcReport; packs: PackGcReport; uploads: UploadSweep }> {
  const d = depsFrom(env);
  const uploads = await sweepUploads(d, (snapshotId) => runState(env, "backup", snapshotId));
  if (uploads.aborted.length) console.log(`sweep: aborted ${uploads.aborted.length} multipart uploads` + uploads.aborted.map((u) => `\n  ${u.key} (${u.why})`).join(""));
  const retention = await applyRetention(d, when);
  // After retention: the chunks only the snapshots it just deleted needed go in this same run.
  const { chunks, packs } = await collectStore(d, { now: when });
  console.log(`chunk gc: ${JSON.stringify(chunks)}`);
  console.log(`pack gc: ${JSON.stringify(packs)}`);
  return { ...retention, chunks, packs, uploads };
}
