// The snapshot lifecycle's cron trigger (wrangler.jsonc "triggers"): hourly, expiries and retention policies are
// applied (retention.ts). worker.ts's scheduled handler dispatches on the cron expression.
import { depsFrom } from "../deps.ts";
import { applyRetention, type RetentionReport } from "./retention.ts";

export const LIFECYCLE_CRON = "17 * * * *";

/** `when` is the trigger's scheduled time: expiries are judged against it. */
export function runLifecycle(env: Env, when: Date): Promise<RetentionReport> {
  return applyRetention(depsFrom(env), when);
}
