// The five phases of a restore, as plain functions; the RestoreWorkflow runs each in its own step.do.
//
//   probe       → the snapshot is good (indexed), the strategy fits its format, the sandbox has the tools,
//                 and the target is empty (or `replace` was asked for)
//   transfer    → archive bytes from the store into the sandbox: to a staging file, or piped into the
//                 extractor (then materialize is overlapped); the SHA-256 of what arrived is checked
//   materialize → extract the staged archive
//   verify      → the agent compares the restored tree with the snapshot's manifest (streamed to it)
//   record      → restore record in the store
import type { Deps } from "../deps.ts";
import { PermanentError, checkStrategyRuns } from "../phase-errors.ts";
import type { WrittenBytes } from "../../container/protocol.ts";
import { AgentClient } from "../sandbox/agent-client.ts";
import { overlayCleanup, overlayLayers, overlayMaterialize, overlayTransfer } from "./overlay-restore.ts";
import { presign } from "../store/s3-store.ts";
import { extensionOf, getJson, putJson, readSnapshot, restoreRecordKey, type SnapshotRecord, type StepResult } from "../snapshots/records.ts";
import { archiveFamily, formatName, isImage, type RestoreStrategy } from "../strategies/registry.ts";

export interface RestoreParams {
  restoreId: string;
  snapshotId: string;
  sandboxId: string;
  path: string;
  strategy: string;
  /** allow restoring over a non-empty target (its contents are removed first) */
  replace: boolean;
  /** drop the page cache in the probe step (cold-cache runs) */
  dropCaches?: boolean;
}

type Layer = Pick<SnapshotRecord, "id" | "format" | "archive"> & { deletedKey?: string };

export interface RestoreProbeResult extends StepResult {
  snapshot: Pick<SnapshotRecord, "id" | "format" | "archive" | "manifest">;
  /** a delta snapshot: its base first, then each delta up to this one; a full snapshot: just itself */
  layers: Layer[];
}

const MAX_LAYERS = 100;

const since = (t: number) => Math.round(performance.now() - t);
/** Where an archive lands in the sandbox. A mounted image stays there as long as the mount, so it has its own place. */
const stagingPath = (p: RestoreParams, snap: RestoreProbeResult["snapshot"]) =>
  isImage(snap.format) ? `/snapflow/images/${p.restoreId}.${extensionOf(snap.format)}` : `/snapflow/staging/${p.restoreId}.${extensionOf(snap.format)}`;

export async function probePhase(d: Deps, p: RestoreParams, s: RestoreStrategy): Promise<RestoreProbeResult> {
  const t = performance.now();
  const snapshot = await readSnapshot(d.store, d.kv, p.snapshotId);
  if (!snapshot) throw new PermanentError(`snapshot ${p.snapshotId} does not exist (or did not complete)`);
  if (s.materialize === "overlay") return overlayProbe(d, p, s, snapshot, t);
  if (snapshot.delta?.kind === "overlay-upper") throw new PermanentError(`snapshot ${p.snapshotId} is an overlay delta: restore it with overlay-restore`);
  if (archiveFamily(snapshot.format) !== archiveFamily(s.format)) {
    throw new PermanentError(`strategy ${s.name} restores ${formatName(s.format)} archives; snapshot ${p.snapshotId} is ${formatName(snapshot.format)}`);
  }
  const agent = new AgentClient(d.transport, p.sandboxId);
  checkStrategyRuns(s, await agent.probe(), p.sandboxId);
  const target = await agent.stat(p.path);
  if (target.exists && (target.type !== "dir" || (target.entries ?? 0) > 0)) {
    if (!p.replace) throw new PermanentError(`restore target ${p.path} in sandbox ${p.sandboxId} is not empty; pass replace: true to overwrite it`);
  }
  const layers: Layer[] = [{ id: snapshot.id, format: snapshot.format, archive: snapshot.archive, deletedKey: snapshot.delta?.deletedKey }];
  for (let base = snapshot.delta?.base; base; ) {
    if (layers.length >= MAX_LAYERS) throw new PermanentError(`snapshot ${p.snapshotId} has more than ${MAX_LAYERS} layers of deltas`);
    const record = await readSnapshot(d.store, d.kv, base);
    if (!record) throw new PermanentError(`snapshot ${p.snapshotId} is a delta on ${base}, which does not exist any more`);
    if (archiveFamily(record.format) !== archiveFamily(s.format)) throw new PermanentError(`base snapshot ${base} is ${formatName(record.format)}; ${s.name} restores ${formatName(s.format)}`);
    layers.unshift({ id: record.id, format: record.format, archive: record.archive, deletedKey: record.delta?.deletedKey });
    base = record.delta?.base;
  }
  if (layers.length > 1 && !isPiped(s)) throw new PermanentError(`snapshot ${p.snapshotId} is a delta: restore it with a pipe strategy (e.g. presigned-tar-zst-pipe)`);
  const { id, format, archive, manifest } = snapshot;
  const ms = since(t);
  return { ms, bytes: 0, snapshot: { id, format, archive, manifest }, layers, ...(await maybeDropCaches(agent, p)) };
}

/** Dropping caches (sync first) is preparation, not probing: its time is reported apart from the step's. */
async function maybeDropCaches(agent: AgentClient, p: RestoreParams) {
  if (!p.dropCaches) return {};
  const c = await agent.dropCaches();
  return { cachesDropped: c.dropped, cacheDropMs: c.ms, ...(c.reason ? { cacheReason: c.reason } : {}) };
}

async function overlayProbe(d: Deps, p: RestoreParams, s: RestoreStrategy, snapshot: SnapshotRecord, t: number): Promise<RestoreProbeResult> {
  const agent = new AgentClient(d.transport, p.sandboxId);
  checkStrategyRuns(s, await agent.probe(), p.sandboxId);
  const target = await agent.stat(p.path);
  if (target.exists && (target.type !== "dir" || (target.entries ?? 0) > 0) && !p.replace) {
    throw new PermanentError(`restore target ${p.path} in sandbox ${p.sandboxId} is not empty; pass replace: true to overwrite it`);
  }
  const layers = await overlayLayers(d, p, snapshot);
  const { id, format, archive, manifest } = snapshot;
  const ms = since(t);
  return { ms, bytes: 0, snapshot: { id, format, archive, manifest }, layers, ...(await maybeDropCaches(agent, p)) };
}

const isPiped = (s: RestoreStrategy) => s.path === "push-pipe" || s.path === "presigned-pipe" || s.path === "presigned-ranged-pipe";

/** Brings one archive into the sandbox: piped into the extractor at p.path, or to a staging file. */
async function bringArchive(d: Deps, p: RestoreParams, s: RestoreStrategy, layer: Layer, staging: string): Promise<WrittenBytes> {
  const agent = new AgentClient(d.transport, p.sandboxId);
  const piped = isPiped(s);
  let got: WrittenBytes;
  if (piped && s.format.kind !== "tar") throw new PermanentError(`${s.name}: images cannot be piped into an extractor`);
  if (s.path === "presigned-ranged-pipe" || s.path === "presigned-ranged-file") {
    const url = await presign(d.s3, layer.archive.key, "GET", d.config.PRESIGN_EXPIRY_SECONDS);
    const where = piped && s.format.kind === "tar" ? { extract: { path: p.path, format: s.format } } : { output: staging };
    got = await agent.downloadRanged({ url, size: layer.archive.bytes, ...where, tool: s.downloader ?? "node", concurrency: 4 });
  } else if (s.path === "presigned-pipe" || s.path === "presigned-file") {
    const url = await presign(d.s3, layer.archive.key, "GET", d.config.PRESIGN_EXPIRY_SECONDS);
    // The strategy's format picks the decompressor (gzip -d reads a pigz archive), matching its `requires`.
    got = await agent.downloadFromUrl(piped && s.format.kind === "tar" ? { url, extract: { path: p.path, format: s.format } } : { url, output: staging });
  } else {
    const o = await d.store.get(layer.archive.key);
    if (!o) throw new PermanentError(`archive ${layer.archive.key} of snapshot ${layer.id} is missing from the store`);
    got = piped && s.format.kind === "tar" ? await agent.extractStream({ path: p.path, ...s.format }, o.body) : await agent.writeFile(staging, o.body);
  }
  if (got.bytes !== layer.archive.bytes || got.sha256 !== layer.archive.sha256) {
    throw new Error(`archive of ${layer.id} arrived damaged: ${got.bytes} bytes sha256 ${got.sha256}, expected ${layer.archive.bytes} bytes sha256 ${layer.archive.sha256}`);
  }
  return got;
}

export async function transferPhase(d: Deps, p: RestoreParams, s: RestoreStrategy, probed: RestoreProbeResult): Promise<StepResult> {
  if (s.materialize === "overlay") return overlayTransfer(d, p, probed.layers);
  const t = performance.now();
  const agent = new AgentClient(d.transport, p.sandboxId);
  const piped = isPiped(s);
  // A retry (or `replace`) starts from an empty target, so a half-extracted earlier attempt leaves nothing behind.
  if (piped || p.replace) await agent.deleteFile(p.path);
  let bytes = 0;
  for (const [i, layer] of probed.layers.entries()) {
    // A delta's deletions go first: extracting it afterwards restores the mtimes of the directories they touched.
    if (i > 0 && layer.deletedKey) {
      const deleted = await getJson<string[]>(d.store, layer.deletedKey);
      if (!deleted) throw new PermanentError(`the deletions of delta ${layer.id} are missing from the store`);
      if (deleted.length) await agent.removeEntries(p.path, deleted);
    }
    bytes += (await bringArchive(d, p, s, layer, stagingPath(p, probed.snapshot))).bytes;
  }
  const last = probed.layers.at(-1)!;
  return { ms: since(t), bytes, sha256: last.archive.sha256, layers: probed.layers.length, ...(piped ? { extractedWhileReceiving: true } : {}) };
}

export async function materializePhase(d: Deps, p: RestoreParams, s: RestoreStrategy, probed: RestoreProbeResult): Promise<StepResult> {
  if (s.materialize === "overlay") return overlayMaterialize(d, p, probed.layers);
  const t = performance.now();
  if (isPiped(s)) return { ms: 0, bytes: 0, overlapped: true };
  const agent = new AgentClient(d.transport, p.sandboxId);
  const staged = stagingPath(p, probed.snapshot);
  // A retried step finds the earlier attempt's mount: take it down before clearing the target.
  if (s.materialize === "mount-kernel" || s.materialize === "mount-fuse") await agent.unmount(p.path).catch(() => {});
  await agent.deleteFile(p.path);
  const snapFormat = probed.snapshot.format;
  if (isImage(snapFormat)) {
    const how = s.materialize === "mount-kernel" || s.materialize === "mount-fuse" ? s.materialize : "extract";
    const done = await agent.materialize({ archive: staged, path: p.path, format: snapFormat, how });
    // An extracted image is no longer needed; a mounted one is the restored tree's backing file.
    if (how === "extract") await agent.deleteFile(staged).catch(() => {});
    return { ms: since(t), bytes: done.bytes, how, ...(done.mounted ? { mounted: done.mounted.path } : {}) };
  }
  if (s.format.kind !== "tar") throw new PermanentError(`${s.name} cannot extract a ${formatName(snapFormat)} archive`);
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
export async function cleanupRestore(d: Deps, p: RestoreParams, s: RestoreStrategy, probed: RestoreProbeResult): Promise<void> {
  if (s.materialize === "overlay") return overlayCleanup(d, p);
  const agent = new AgentClient(d.transport, p.sandboxId);
  // A mount made by materialize must go before its backing file and mount point can.
  if (s.materialize?.startsWith("mount")) await agent.unmount(p.path).catch(() => {});
  await agent.deleteFile(stagingPath(p, probed.snapshot));
  await agent.deleteFile(p.path);
}
