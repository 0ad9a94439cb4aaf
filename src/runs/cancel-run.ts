// Cancelling a backup or restore that is still going (POST /api/runs/:id/cancel, `snapflow cancel ID`):
//
//   1. its Workflow is terminated: the run stops where it is;
//   2. its cleanup runs here — the same one its Workflow runs on failure (cleanupBackup / cleanupRestore), which a
//      terminated Workflow never runs itself (workflow-controls.ts; scripts/experiments/ engine-after-restart): a
//      backup's objects, open uploads and staging files go, a restore's target is put back exactly as it was;
//      It runs again a moment later (and, for a restore, while its staged tree keeps reappearing): the agent may
//      still be finishing the terminated step's call;
//   3. its target's lease is released and its progress says `cancelled`.
//
// A run whose record was written before the terminate landed is good (success is final, as for the watchdog): its
// cleanup only finishes it, and the answer is a 409 saying it completed. A run already ended is a 409 too; an id no
// run has is a 404. The lease carries the run's params (target-leases.ts): a run with no lease left has nothing of
// its own to clean (it never started, or its own end released it).
import type { Deps } from "../deps.ts";
import { SnapflowError } from "../errors.ts";
import { BACKUP_PHASES, RESTORE_PHASES } from "../phases/phase-names.ts";
import { AgentClient } from "../sandbox/agent-client.ts";
import { reportProgress } from "../snapshots/progress.ts";
import { releaseLease } from "../snapshots/restore-leases.ts";
import { readProgress, type RunProgress } from "../snapshots/records.ts";
import { parsedLeaseAt, releaseTargetLease, TARGETS_PREFIX, type TargetLease } from "../snapshots/target-leases.ts";
import { listAll } from "../store/list-all.ts";
import { cleanupFor } from "./interrupted-runs.ts";
import { instanceOf, type RunKind } from "./run-liveness.ts";
import { terminateQuietly } from "./workflow-controls.ts";

const ENDED = ["complete", "errored", "terminated"];
/** How long the agent gets to notice that the terminated step's call went away, before the cleanup runs again. */
const SETTLE_MS = 1000;

export interface CancelAnswer {
  id: string;
  kind: RunKind;
  status: "cancelled";
  /** the step it was in when it stopped (the first one not completed) */
  stoppedAt: string;
  /** what the cleanup did: the store's and the sandbox's leftovers removed, a restore's target put back */
  cleanup: string;
}

export const runKindOf = (id: string): RunKind | null => (id.startsWith("bk-") ? "backup" : id.startsWith("rs-") ? "restore" : null);

/** The lease a run holds, found by listing the leases (one per run in flight). */
async function leaseOf(d: Deps, runId: string): Promise<TargetLease | null> {
  for await (const o of listAll(d.store, TARGETS_PREFIX)) {
    const found = await parsedLeaseAt(d.store, o.key);
    if (found && "lease" in found && found.lease.runId === runId) return found.lease;
  }
  return null;
}

export async function cancelRun(env: Env, d: Deps, id: string): Promise<CancelAnswer> {
  const kind = runKindOf(id);
  if (!kind) throw new SnapflowError("bad_request", `id: ${id} is not a backup (bk-…) or restore (rs-…) id; a matrix is not cancelled by id`, { field: "id" });
  const [instance, progress] = await Promise.all([instanceOf(env, kind, id), readProgress(d.kv, id)]);
  if (!instance && !progress) throw new SnapflowError("not_found", `no ${kind} with id ${id}`, { field: "id" });
  const before = instance ? (await instance.status()).status : "gone";
  if (ENDED.includes(before) || progress?.status === "complete" || progress?.status === "cancelled") {
    const how = progress?.status === "cancelled" ? "was already cancelled" : before === "complete" || progress?.status === "complete" ? "already completed" : `already ended ${before}`;
    throw new SnapflowError("run_ended", `${kind} ${id} ${how}; there is nothing to cancel`, { field: "id" });
  }
  if (instance) await terminateQuietly(instance);
  const lease = await leaseOf(d, id);
  // Read again: the steps the run finished before the terminate landed decide what its cleanup must undo.
  const last = (await readProgress(d.kv, id)) ?? progress;
  let recorded = lease ? await cleanupFor(d, lease, last) : false;
  // The terminated step's call to the agent may still be finishing there (seen: a presigned restore's extraction
  // made its staged tree again after the first cleanup removed it). Cleanups are repeatable: once more after a
  // moment, then, for a restore, again while its staged tree keeps coming back (bounded).
  if (lease && !recorded) {
    await new Promise((r) => setTimeout(r, SETTLE_MS));
    recorded = await cleanupFor(d, lease, last);
    const staged = (last?.steps.probe as { swap?: { staged: string } } | undefined)?.swap?.staged;
    for (let i = 0; staged && !recorded && i < 5 && (await new AgentClient(d.transport, lease.sandboxId).stat(staged)).exists; i++) {
      await new Promise((r) => setTimeout(r, SETTLE_MS));
      recorded = await cleanupFor(d, lease, last);
    }
  }
  if (lease) await releaseTargetLease(d.store, lease.sandboxId, lease.path, id);
  const base: RunProgress = last ?? { id, kind, status: "running", strategy: String((lease?.params as { strategy?: unknown } | undefined)?.strategy ?? "unknown"), startedAt: lease?.takenAt ?? new Date().toISOString(), steps: {} };
  const stoppedAt = (kind === "backup" ? BACKUP_PHASES : RESTORE_PHASES).find((p) => !base.steps[p]) ?? "its end";
  // A restore stopped inside its probe may hold its snapshot's restore lease (restore-leases.ts) without a probe
  // result for its cleanup to go by: the lease goes here (a swap journal it planned is rolled back by the agent's
  // sweeper, container/system/sweep.ts).
  if (kind === "restore" && !base.steps.probe && base.snapshotId) await releaseLease(d.store, base.snapshotId, id);
  if (recorded) {
    await reportProgress(d.kv, { ...base, status: "complete" });
    throw new SnapflowError("run_ended", `${kind} ${id} completed before the cancel landed: it is kept${kind === "backup" ? ` (delete it: DELETE /api/snapshots/${id})` : ""}`, { field: "id" });
  }
  const cleanup = !lease
    ? "it held no target (never started, or already released): nothing to clean"
    : kind === "backup"
      ? "its archive, manifest, open uploads and staging files removed; nothing recorded"
      : "its target put back as it was; its staged tree and downloads removed";
  await reportProgress(d.kv, { ...base, status: "cancelled", error: `${kind} ${id} cancelled at ${stoppedAt} (${new Date().toISOString()}): ${cleanup}` });
  return { id, kind, status: "cancelled", stoppedAt, cleanup };
}
