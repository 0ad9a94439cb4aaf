// The snapshot lifecycle's cron trigger (wrangler.jsonc "triggers"): hourly, expiries and retention policies are
// applied (retention.ts), then chunks no index references any more are collected (chunk-gc.ts, with its default
// grace period). worker.ts's scheduled handler dispatches on the cron expression.
import { collectChunks, type ChunkGcReport } from "../chunks/chunk-gc.ts";
import { depsFrom } from "../deps.ts";
import { applyRetention, type RetentionReport } from "./retention.ts";

export const LIFECYCLE_CRON = "17 * * * *";

/** `when` is the trigger's scheduled time: expiries are judged against it. */
export async function runLifecycle(env: Env, when: Date): Promise<RetentionReport & { chunks: ChunkGcReport }> {
  const d = depsFrom(env);
  const retention = await applyRetention(d, when);
  // After retention: the chunks only the snapshots it just deleted needed go in this same run.
  const chunks = await collectChunks(d, { now: when });
  console.log(`chunk gc: ${JSON.stringify(chunks)}`);
  return { ...retention, chunks };
}
