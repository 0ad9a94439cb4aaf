// Whether a run is still going, asked of its Workflow: leases and sweepers must not take what a running run owns,
// and must not wait for ever on a run that died without saying so.
import type { Owner } from "../store/sweep-uploads.ts";

const ENDED = new Set(["complete", "errored", "terminated"]);

export type RunKind = "backup" | "restore";

/** The Workflow binding that runs backups or restores. */
export const workflowOf = (env: Env, kind: RunKind): Workflow => (kind === "backup" ? env.BACKUP_WORKFLOW : env.RESTORE_WORKFLOW);

/** live: queued, running, waiting or paused; ended: finished any way; unknown: no such Workflow (never created, gone, or not a Workflow's run). */
export async function runState(env: Env, kind: RunKind, id: string): Promise<Owner> {
  const instance = await instanceOf(env, kind, id);
  if (!instance) return "unknown";
  return ENDED.has((await instance.status()).status) ? "ended" : "live";
}

/** The run's Workflow instance, or null when there is none (never created, or gone). */
export async function instanceOf(env: Env, kind: RunKind, id: string): Promise<WorkflowInstance | null> {
  try {
    return await workflowOf(env, kind).get(id);
  } catch {
    return null;
  }
}
