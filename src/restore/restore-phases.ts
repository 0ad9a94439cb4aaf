// The five phases of a restore, as plain functions; the RestoreWorkflow runs each in its own step.do.
//
//   probe       → the snapshot is good (indexed), the strategy fits its format, the sandbox has the tools,
//                 and the target is empty (or `replace` was asked for)
//   transfer    → archive bytes from the store into the sandbox: to a staging file, or piped into the
//                 extractor (then materialize is overlapped); the SHA-256 of what arrived is checked
//   materialize → extract the staged archive
//   verify      → the agent compares the restored tree with the snapshot's manifest (streamed to it)
//   record      → restore record in the store
import { archiveExtension } from "../../container/tar-argv.ts";
import type { Deps } from "../deps.ts";
import { PermanentError, checkStrategyRuns } from "../phase-errors.ts";
import type { WrittenBytes } from "../../container/protocol.ts";
import { AgentClient } from "../sandbox/agent-client.ts";
import { presign } from "../store/s3-store.ts";
import { putJson, readSnapshot, restoreRecordKey, type SnapshotRecord, type StepResult } from "../snapshots/records.ts";
import { archiveFamily, type RestoreStrategy } from "../strategies/registry.ts";

export interface RestoreParams {
  restoreId: string;
  snapshotId: string;
  sandboxId: string;
  path: string;
  strategy: string;
  /** allow restoring over a non-empty target (its contents are removed first) */
  replace: boolean;
}

export interface RestoreProbeResult extends StepResult {
  snapshot: Pick<SnapshotRecord, "id" | "format" | "archive" | "manifest">;
}

const since = (t: number) => Math.round(performance.now() - t);
const stagingPath = (p: RestoreParams, snap: RestoreProbeResult["snapshot"]) => `/snapflow/staging/${p.restoreId}.${archiveExtension(snap.format)}`;

export async function probePhase(d: Deps, p: RestoreParams, s: RestoreStrategy): Promise<RestoreProbeResult> {
  const t = performance.now();
  const snapshot = await readSnapshot(d.store, d.kv, p.snapshotId);
  if (!snapshot) throw new PermanentError(`snapshot ${p.snapshotId} does not exist (or did not complete)`);
  if (archiveFamily(snapshot.format) !== archiveFamily(s.format)) {
    throw new PermanentError(`strategy ${s.name} restores ${s.format.compression} archives; snapshot ${p.snapshotId} is ${snapshot.format.compression}`);
  }
  const agent = new AgentClient(d.transport, p.sandboxId);
  checkStrategyRuns(s, await agent.probe(), p.sandboxId);
  const target = await agent.stat(p.path);
  if (target.exists && (target.type !== "dir" || (target.entries ?? 0) > 0)) {
    if (!p.replace) throw new PermanentError(`restore target ${p.path} in sandbox ${p.sandboxId} is not empty; pass replace: true to overwrite it`);
  }
  const { id, format, archive, manifest } = snapshot;
  return { ms: since(t), bytes: 0, snapshot: { id, format, archive, manifest } };
}

export async function transferPhase(d: Deps, p: RestoreParams, s: RestoreStrategy, probed: RestoreProbeResult): Promise<StepResult> {
  const t = performance.now();
  const agent = new AgentClient(d.transport, p.sandboxId);
  const snap = probed.snapshot;
  const piped = s.path === "push-pipe" || s.path === "presigned-pipe";
  // A retry (or `replace`) starts from an empty target, so a half-extracted earlier attempt leaves nothing behind.
  if (piped || p.replace) await agent.deleteFile(p.path);
  let got: WrittenBytes;
  if (s.path === "presigned-pipe" || s.path === "presigned-file") {
    const url = await presign(d.s3, snap.archive.key, "GET", d.config.PRESIGN_EXPIRY_SECONDS);
    // The strategy's format picks the decompressor (gzip -d reads a pigz archive), matching its `requires`.
    got = await agent.downloadFromUrl(piped ? { url, extract: { path: p.path, format: s.format } } : { url, output: stagingPath(p, snap) });
  } else {
    const o = await d.store.get(snap.archive.key);
    if (!o) throw new PermanentError(`archive ${snap.archive.key} of snapshot ${snap.id} is missing from the store`);
    got = piped ? await agent.extractStream({ path: p.path, ...s.format }, o.body) : await agent.writeFile(stagingPath(p, snap), o.body);
  }
  if (got.bytes !== snap.archive.bytes || got.sha256 !== snap.archive.sha256) {
    throw new Error(`archive arrived damaged: ${got.bytes} bytes sha256 ${got.sha256}, expected ${snap.archive.bytes} bytes sha256 ${snap.archive.sha256}`);
  }
  return { ms: since(t), bytes: got.bytes, sha256: got.sha256, ...(piped ? { extractedWhileReceiving: true } : {}) };
}

export async function materializePhase(d: Deps, p: RestoreParams, s: RestoreStrategy, probed: RestoreProbeResult): Promise<StepResult> {
  const t = performance.now();
  if (s.path === "push-pipe" || s.path === "presigned-pipe") return { ms: 0, bytes: 0, overlapped: true };
  const agent = new AgentClient(d.transport, p.sandboxId);
  const staged = stagingPath(p, probed.snapshot);
  await agent.deleteFile(p.path);
  const done = await agent.extractFile({ archive: staged, path: p.path, format: s.format });
  await agent.deleteFile(staged).catch(() => {});
  return { ms: since(t), bytes: done.bytes };
}

export async function verifyPhase(d: Deps, p: RestoreParams, probed: RestoreProbeResult): Promise<StepResult> {
  const t = performance.now();
  const manifest = await d.store.get(probed.snapshot.manifest.key);
  if (!manifest) throw new PermanentError(`manifest ${probed.snapshot.manifest.key} of snapshot ${p.snapshotId} is missing`);
  const v = await new AgentClient(d.transport, p.sandboxId).verify(p.path, manifest.body);
  if (!v.equal) {
    const first = v.differences.slice(0, 5).map((x) => `${x.kind} ${x.path}${x.fields ? ` (${x.fields.map((f) => f.name).join(", ")})` : ""}`).join("; ");
    throw new PermanentError(`restored tree differs from snapshot ${p.snapshotId}: ${v.counts.missing} missing, ${v.counts.extra} extra, ${v.counts.changed} changed; first: ${first}`);
  }
  return { ms: since(t), bytes: v.totals.bytes, files: v.totals.files, dirs: v.totals.dirs, symlinks: v.totals.symlinks, agentMs: v.ms };
}

export async function recordPhase(d: Deps, p: RestoreParams, s: RestoreStrategy, steps: Record<string, StepResult>): Promise<StepResult> {
  const t = performance.now();
  await putJson(d.store, restoreRecordKey(p.restoreId), { ...p, strategy: s.name, completedAt: new Date().toISOString(), verified: true, steps });
  return { ms: since(t), bytes: 0 };
}

/**
 * After a failed restore whose probe passed: remove the staging file and whatever was extracted, so the target
 * is left empty rather than half-restored. (If the probe failed, the target was never touched.)
 */
export async function cleanupRestore(d: Deps, p: RestoreParams, probed: RestoreProbeResult): Promise<void> {
  const agent = new AgentClient(d.transport, p.sandboxId);
  await agent.deleteFile(stagingPath(p, probed.snapshot));
  await agent.deleteFile(p.path);
}
