// The five phases of a restore, as plain functions; run-restore.ts runs them in order, a Workflow each in its own
// step.do. The strategy's plan (restore-plan.ts: an archive, or the overlay) does the probe's checks, the
// transfer, the materialization and the cleanup; verify and record are the same for every plan.
//
//   probe       → the snapshot is good (indexed), the strategy fits its format, the sandbox has the tools,
//                 and the target is empty (or `replace` was asked for)
//   transfer    → archive bytes from the store into the sandbox: to a staging file, or piped into the
//                 extractor (then materialize is overlapped); the SHA-256 of what arrived is checked
//   materialize → extract or mount the staged archive
//   verify      → the agent compares the restored tree with the snapshot's manifest (streamed to it)
//   record      → restore record in the store
import type { Deps } from "../deps.ts";
import { SnapflowError } from "../errors.ts";
import { since } from "../phases/phase-runner.ts";
import { AgentClient } from "../sandbox/agent-client.ts";
import { putJson, readSnapshot, restoreRecordKey, type StepResult } from "../snapshots/records.ts";
import { releaseLease, takeLease } from "../snapshots/restore-leases.ts";
import type { RestoreStrategy } from "../strategies/registry.ts";
import type { RestoreContext } from "./restore-context.ts";
import type { RestoreParams, RestoreProbeResult } from "./restore-params.ts";
import { planOf } from "./restore-plan.ts";

const contextOf = (d: Deps, p: RestoreParams, s: RestoreStrategy): RestoreContext => ({ d, p, s, agent: new AgentClient(d.transport, p.sandboxId) });

export async function probePhase(d: Deps, p: RestoreParams, s: RestoreStrategy): Promise<RestoreProbeResult> {
  const t = performance.now();
  const c = contextOf(d, p, s);
  // The lease first, then the record: a delete either sees the lease or this probe sees no record (restore-leases.ts).
  await takeLease(d.store, p.snapshotId, p.restoreId);
  let planned: Awaited<ReturnType<ReturnType<typeof planOf>["probe"]>>;
  try {
    const snapshot = await readSnapshot(d.store, d.kv, p.snapshotId);
    if (!snapshot) throw new SnapflowError("not_found", `snapshot ${p.snapshotId} does not exist (or did not complete)`, { field: "snapshotId" });
    planned = await planOf(s).probe(c, snapshot);
  } catch (e) {
    // The restore never started: it holds nothing.
    await releaseLease(d.store, p.snapshotId, p.restoreId);
    throw e;
  }
  const ms = since(t);
  // Dropping caches (sync first) is preparation, not probing: its time is reported apart from the step's.
  const caches = p.dropCaches ? await c.agent.dropCaches() : undefined;
  return { ms, bytes: 0, ...planned, ...(caches ? { cachesDropped: caches.dropped, cacheDropMs: caches.ms, ...(caches.reason ? { cacheReason: caches.reason } : {}) } : {}) };
}

export function transferPhase(d: Deps, p: RestoreParams, s: RestoreStrategy, probed: RestoreProbeResult): Promise<StepResult> {
  return planOf(s).transfer(contextOf(d, p, s), probed);
}

export function materializePhase(d: Deps, p: RestoreParams, s: RestoreStrategy, probed: RestoreProbeResult): Promise<StepResult> {
  return planOf(s).materialize(contextOf(d, p, s), probed);
}

/**
 * Verify, without reading the restored bytes again when they were checked on arrival: an extraction that compared
 * every entry as it streamed into tar and then walked the tree's metadata is done (`verified` in its step); a
 * mounted or extracted image, whose content its SHA-256 vouched for on arrival, gets the metadata walk here; with
 * deepVerify, every file is hashed again.
 */
export async function verifyPhase(d: Deps, p: RestoreParams, s: RestoreStrategy, probed: RestoreProbeResult, steps: Record<string, StepResult> = {}): Promise<StepResult> {
  const plan = planOf(s);
  const check = () => checkTree(d, p, probed, steps);
  return plan.verify ? plan.verify(contextOf(d, p, s), probed, check) : check();
}

async function checkTree(d: Deps, p: RestoreParams, probed: RestoreProbeResult, steps: Record<string, StepResult>): Promise<StepResult> {
  const t = performance.now();
  const inStream = [steps.transfer?.verified, steps.materialize?.verified].find((v) => (v as { metadata?: string } | undefined)?.metadata === "walk");
  if (inStream && !p.deepVerify) {
    const { bytes, files, dirs, symlinks } = probed.snapshot.manifest;
    return { ms: since(t), bytes, files, dirs, symlinks, verified: { ...(inStream as object), by: "in-stream while extracting, then a metadata walk" } };
  }
  if (!(await d.store.head(probed.snapshot.manifest.key))) throw new SnapflowError("snapshot_unusable", `manifest ${probed.snapshot.manifest.key} of snapshot ${p.snapshotId} is missing`);
  const expected = { url: await d.presigner.url(probed.snapshot.manifest.key, "GET") };
  const v = await new AgentClient(d.transport, p.sandboxId).verifyTree({ path: p.path, expected, deep: p.deepVerify ?? false });
  if (!v.equal) {
    const first = v.differences.slice(0, 5).map((x) => `${x.kind} ${x.path}${x.fields ? ` (${x.fields.map((f) => f.name).join(", ")})` : ""}`).join("; ");
    throw new SnapflowError("snapshot_unusable", `restored tree differs from snapshot ${p.snapshotId}: ${v.counts.missing} missing, ${v.counts.extra} extra, ${v.counts.changed} changed; first: ${first}`);
  }
  const by = p.deepVerify ? "every file hashed (deepVerify)" : "the image's SHA-256 on arrival, then a metadata walk";
  return { ms: since(t), bytes: v.totals.bytes, files: v.totals.files, dirs: v.totals.dirs, symlinks: v.totals.symlinks, agentMs: v.ms, verified: { ...v.verified, by } };
}

export async function recordPhase(d: Deps, p: RestoreParams, s: RestoreStrategy, steps: Record<string, StepResult>): Promise<StepResult> {
  const t = performance.now();
  await putJson(d.store, restoreRecordKey(p.restoreId), { ...p, strategy: s.name, completedAt: new Date().toISOString(), verified: true, ...lazyMoments(steps), steps });
  return { ms: since(t), bytes: 0 };
}

/**
 * A lazy restore's two moments, on the record itself: usable (request → the mount answers, from materialize) and
 * complete (request → every chunk local and verified, from verify), with which chunks came on demand and which ahead.
 */
function lazyMoments(steps: Record<string, StepResult>) {
  const usableMs = steps.materialize?.usableMs;
  const completeMs = steps.verify?.completeMs;
  const lazy = steps.verify?.lazy;
  return usableMs === undefined && completeMs === undefined ? {} : { usableMs, completeMs, ...(lazy ? { chunks: lazy } : {}) };
}

/**
 * After a failed restore whose probe passed: remove staging files, mounts and whatever was extracted, so the
 * target is left empty rather than half-restored. (If the probe failed, the target was never touched.)
 */
export async function cleanupRestore(d: Deps, p: RestoreParams, s: RestoreStrategy, probed: RestoreProbeResult): Promise<void> {
  await planOf(s).cleanup(contextOf(d, p, s), probed);
  await releaseLease(d.store, p.snapshotId, p.restoreId);
}
