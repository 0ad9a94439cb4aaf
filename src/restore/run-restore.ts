// The restore's phase sequence, written once: the RestoreWorkflow and the benchmark cell both run it. `probed` is
// handed out as soon as the probe passed, so a caller's cleanup knows what the run may have touched.
import type { Deps } from "../deps.ts";
import type { PhaseRunner } from "../phases/phase-runner.ts";
import type { RestoreStrategy } from "../strategies/registry.ts";
import type { RestoreParams, RestoreProbeResult } from "./restore-params.ts";
import { releaseLease } from "../snapshots/restore-leases.ts";
import { swappedInByTransfer } from "./usable-step.ts";
import { materializePhase, probePhase, recordPhase, transferPhase, verifyPhase } from "./restore-phases.ts";

export interface RestoreRunOptions {
  /** called once the probe passed: from here on a failure must clean up */
  onProbed?: (probed: RestoreProbeResult) => void;
  /** the benchmark cell records no restore record (its result is the run's record) */
  record?: boolean;
  /** a compaction's wake: its lazy tree is not walked here (its chunks are still all fetched); compaction-check.ts checks it once its image is made */
  deferCheck?: boolean;
}

export async function runRestorePhases(run: PhaseRunner, d: Deps, p: RestoreParams, s: RestoreStrategy, options: RestoreRunOptions = {}): Promise<RestoreProbeResult> {
  const probed = await run.run("probe", () => probePhase(d, p, s));
  options.onProbed?.(probed);
  await run.run("transfer", () => transferPhase(d, p, s, probed));
  // A tree swapped in by the transfer (one made at the target, a file-level wake's overlay) has nothing left to
  // materialize: a wake or a lazy restore waits for one step fewer.
  if (!swappedInByTransfer(run.steps)) await run.run("materialize", () => materializePhase(d, p, s, probed));
  const record = options.record ?? true;
  // Without a record step the old tree goes as soon as the new one is in (the cell's result is its record).
  await run.run("verify", () => verifyPhase(d, p, s, probed, { ...run.steps }, { commit: !record, deferCheck: options.deferCheck }));
  // Verified: nothing of the snapshot is read from the store any more, so a delete may go ahead (restore-leases.ts).
  // Outside a step, so it runs whether or not a record step follows; repeating it on a replay is harmless. It must
  // never fail the run (a verified tree would be rolled back for a lease that expires on its own anyway).
  await releaseLease(d.store, p.snapshotId, p.restoreId).catch((e) => console.warn(`lease of ${p.restoreId} on ${p.snapshotId} not released: ${e instanceof Error ? e.message : String(e)}`));
  if (record) await run.run("record", () => recordPhase(d, p, s, { ...run.steps }, probed));
  return probed;
}
