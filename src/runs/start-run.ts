// Starting a backup or restore Workflow under its target's lease (snapshots/target-leases.ts): the lease first, so
// of two requests for one (sandbox, path) the second is refused with a 409 naming the run that holds it, before
// any Workflow exists. The run releases the lease when it ends (workflows/*); a run that never does is found dead
// here by its Workflow's status and its lease taken over. A request's own checks of the sandbox (a backup's source
// is a directory, a restore's target is empty: `check`) run under the lease, after it is taken and before the
// Workflow is created: a path another run of ours is swapping is refused as busy, not judged mid-swap, and a
// refused check releases the lease.
import type { Deps } from "../deps.ts";
import { SnapflowError } from "../errors.ts";
import { runState, workflowOf } from "./run-liveness.ts";
import { releaseTargetLease, takeTargetLease, type LeaseKind, type TargetLease } from "../snapshots/target-leases.ts";


/** Is the holder's Workflow still going? One that cannot be found (never created, or gone) is not. */
export async function runIsLive(env: Env, holder: TargetLease): Promise<boolean> {
  return (await runState(env, holder.kind, holder.runId)) === "live";
}

export async function startRunUnderLease<P>(env: Env, d: Deps, kind: LeaseKind, id: string, target: { sandboxId: string; path: string }, params: P, check?: () => Promise<void>): Promise<void> {
  const got = await takeTargetLease(d.store, { ...target, runId: id, kind, params }, (holder) => runIsLive(env, holder));
  if (!got.taken) {
    const h = got.holder;
    const where = h.path === target.path ? `${target.path} in sandbox ${target.sandboxId} is in use` : `${target.path} in sandbox ${target.sandboxId} ${h.path.length < target.path.length ? "lies inside" : "holds"} ${h.path}, which is in use`;
    throw new SnapflowError("target_busy", `${where} by ${h.kind} ${h.runId} (since ${h.takenAt}); one backup or restore of a path (or of a path inside it) at a time: wait for it to end (GET /api/${h.kind}s/${h.runId})`, { field: "path" });
  }
  try {
    await check?.();
    await workflowOf(env, kind).create({ id, params });
  } catch (e) {
    await releaseTargetLease(d.store, target.sandboxId, target.path, id).catch(() => {});
    throw e;
  }
}
