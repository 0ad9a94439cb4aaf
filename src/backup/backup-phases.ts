// The five phases of a backup, as plain functions of (deps, params, earlier results). The BackupWorkflow runs
// each inside its own step.do; keeping them here keeps the Workflow class to wiring and the phases readable.
//
//   probe    → can this sandbox run the strategy (tools)?                       agent GET /v1/probe
//   archive  → source manifest to the store; direct strategies also archive to a staging file in the sandbox
//   transfer → archive bytes to the store: staged file → one put, or the live tar stream → multipart
//   verify   → read the stored object back, check its size and SHA-256
//   record   → snapshot record in the store and index entry in KV: from here on the snapshot is "good"
import type { TarFormat } from "../../container/protocol.ts";
import type { Deps } from "../deps.ts";
import { AgentClient } from "../sandbox/agent-client.ts";
import { equalPartGuard, PartRuleError, partSizeFor, R2_MULTIPART, uploadStreamMultipart } from "../store/multipart-upload.ts";
import { base64ToBytes } from "../sandbox/base64-events.ts";
import { presign, s3Store } from "../store/s3-store.ts";
import { archiveKey, deletedKey, extensionOf, manifestKey, recordSnapshot, type SnapshotRecord, type StepResult } from "../snapshots/records.ts";
import { formatName, isImage, type BackupStrategy } from "../strategies/registry.ts";
import { checkStrategyRuns, PermanentError } from "../phase-errors.ts";

export interface BackupParams {
  snapshotId: string;
  sandboxId: string;
  path: string;
  strategy: string;
  /** delta strategies: the snapshot this one applies on top of */
  baseSnapshotId?: string;
  /** drop the page cache in the probe step (cold-cache runs) */
  dropCaches?: boolean;
  /** multipart paths: part size and parts in flight */
  tuning?: { partSizeMiB?: number; concurrency?: number };
}

export interface ArchiveResult extends StepResult {
  sha256?: string;
  staged?: string;
  /** a delta: the list of changed entries in the sandbox, and what it holds */
  delta?: { list: string; changed: number; deleted: number; changedBytes: number };
  /** an overlay delta: the upper directory archived instead of `path` */
  archiveRoot?: string;
  manifest: { files: number; dirs: number; symlinks: number; bytes: number; manifestBytes: number; ms: number };
}

export interface TransferResult extends StepResult {
  sha256: string;
  ttfbMs?: number;
  parts?: number;
}

const since = (t: number) => Math.round(performance.now() - t);
/** The requested part size, or one sized for the expected bytes; either way within R2's rules. */
function partSizeOf(p: BackupParams, expected: number): number {
  const asked = p.tuning?.partSizeMiB ? p.tuning.partSizeMiB * 2 ** 20 : 0;
  const needed = partSizeFor(expected, R2_MULTIPART.minPartBytes);
  if (asked && asked < needed) throw new PermanentError(`tuning.partSizeMiB ${p.tuning!.partSizeMiB} is too small for ${expected} bytes in ${R2_MULTIPART.maxParts} parts; use at least ${needed / 2 ** 20}`);
  return asked || partSizeFor(expected);
}
const stagedArchive = (p: BackupParams, s: BackupStrategy) => `/snapflow/staging/${p.snapshotId}.${extensionOf(s.format)}`;

export async function probePhase(d: Deps, p: BackupParams, s: BackupStrategy): Promise<StepResult> {
  const t = performance.now();
  const agent = new AgentClient(d.transport, p.sandboxId);
  const probe = await agent.probe();
  checkStrategyRuns(s, probe, p.sandboxId);
  const ms = since(t);
  // Dropping caches (sync first) is preparation, not probing: its time is reported apart from the step's.
  const caches = p.dropCaches ? await agent.dropCaches() : undefined;
  return { ms, bytes: 0, cpus: probe.cpus, kernel: probe.kernel, runtime: probe.runtime, ...(caches ? { cachesDropped: caches.dropped, cacheDropMs: caches.ms, ...(caches.reason ? { cacheReason: caches.reason } : {}) } : {}) };
}

export async function archivePhase(d: Deps, p: BackupParams, s: BackupStrategy): Promise<ArchiveResult> {
  const t = performance.now();
  const agent = new AgentClient(d.transport, p.sandboxId);
  // The manifest is small JSON (about 150 bytes a file), not archive bytes: buffering it is fine.
  let text: string;
  let delta: ArchiveResult["delta"];
  let archiveRoot: string | undefined;
  if (s.delta === "overlay-upper") {
    // The merged view is what a restore must reproduce; the upper directory is what changed.
    text = await (await agent.manifest(p.path)).text();
    const overlay = (await agent.mounts()).mounts.find((m) => m.kind === "overlay" && m.path === p.path);
    if (!overlay?.upper) throw new PermanentError(`no overlay is mounted at ${p.path} in sandbox ${p.sandboxId}; restore the base snapshot there with overlay-restore first`);
    archiveRoot = overlay.upper;
  } else if (s.delta) {
    const planned = await planDelta(d, p, agent);
    text = planned.manifestText;
    delta = planned.delta;
  } else {
    text = await (await agent.manifest(p.path)).text();
  }
  const totals = (JSON.parse(text) as { totals: ArchiveResult["manifest"] }).totals;
  await d.store.put(manifestKey(p.snapshotId), text, { contentType: "application/json" });
  const manifest = { ...totals, manifestBytes: text.length, ms: since(t) };
  if (s.path === "multipart" || s.path === "presigned-multipart") {
    // Streaming strategies archive during transfer; this phase only took the manifest (and planned a delta).
    return { ms: since(t), bytes: 0, overlapped: true, manifest, delta, ...(archiveRoot ? { archiveRoot } : {}) };
  }
  const staged = stagedArchive(p, s);
  const made = isImage(s.format)
    ? await agent.makeImage({ path: p.path, output: staged, format: s.format })
    : await agent.archiveToFile({ path: p.path, output: staged, format: s.format, filesFrom: delta?.list });
  return { ms: since(t), bytes: made.bytes, sha256: made.sha256, archiveMs: made.ms, staged, manifest, delta };
}

/** What changed since the base snapshot: the agent compares the tree with the base's manifest. */
async function planDelta(d: Deps, p: BackupParams, agent: AgentClient) {
  const base = await d.store.get(manifestKey(p.baseSnapshotId!));
  if (!base) throw new PermanentError(`base snapshot ${p.baseSnapshotId}'s manifest is missing from the store`);
  const list = `/snapflow/staging/${p.snapshotId}.delta-list`;
  const plan = await agent.delta(p.path, list, base.body);
  await d.store.put(deletedKey(p.snapshotId), JSON.stringify(plan.deleted), { contentType: "application/json" });
  return {
    manifestText: JSON.stringify(plan.manifest),
    delta: { list, changed: plan.changed, deleted: plan.deleted.length, changedBytes: plan.changedBytes },
  };
}

export async function transferPhase(d: Deps, p: BackupParams, s: BackupStrategy, archived: ArchiveResult): Promise<TransferResult> {
  const t = performance.now();
  const agent = new AgentClient(d.transport, p.sandboxId);
  const key = archiveKey(p.snapshotId, s.format);
  if (s.path === "stream") {
    const r = await agent.readFile(archived.staged!);
    const length = Number(r.headers.get("content-length"));
    if (!Number.isFinite(length) || length !== archived.bytes) throw new Error(`staged archive is ${length} bytes, expected ${archived.bytes}`);
    await d.store.put(key, r.body!, { length, metadata: { sha256: archived.sha256! } });
    // The staging file is no longer needed; failing to remove it must not fail the backup.
    await agent.deleteFile(archived.staged!).catch(() => {});
    return { ms: since(t), bytes: length, sha256: archived.sha256! };
  }
  if (s.path === "presigned-put") {
    const url = await presign(d.s3, key, "PUT", d.config.PRESIGN_EXPIRY_SECONDS);
    const sent = await agent.uploadToUrl({ path: archived.staged!, url });
    if (sent.sha256 !== archived.sha256) throw new Error(`uploaded bytes (sha256 ${sent.sha256}) are not the staged archive (sha256 ${archived.sha256})`);
    await agent.deleteFile(archived.staged!).catch(() => {});
    return { ms: since(t), bytes: sent.bytes, sha256: sent.sha256 };
  }
  if (s.path === "sdk-base64-chunked") return sdkChunkedTransfer(d, p, archived, key, t);
  if (s.path === "sdk-base64-stream") {
    const body = await d.transport.readFileStreamBase64(p.sandboxId, archived.staged!);
    const up = await uploadStreamMultipart(d.store, key, body, { partSize: partSizeFor(archived.bytes), concurrency: 2 });
    if (up.sha256 !== archived.sha256) throw new Error(`decoded bytes (sha256 ${up.sha256}) are not the staged archive (sha256 ${archived.sha256})`);
    await agent.deleteFile(archived.staged!).catch(() => {});
    return { ms: since(t), bytes: up.bytes, sha256: up.sha256, parts: up.parts };
  }
  // multipart: the archive is made while it uploads.
  if (isImage(s.format)) throw new PermanentError(`${formatName(s.format)} images are made to a file; they cannot be piped (${s.name})`);
  if (s.path === "presigned-multipart") return presignedMultipartTransfer(d, p, s.format, archived, key, t);
  const r = await agent.archiveStream({ path: archived.archiveRoot ?? p.path, ...s.format, filesFrom: archived.delta?.list });
  let ttfbMs: number | undefined;
  const timed = r.body!.pipeThrough(new TransformStream<Uint8Array, Uint8Array>({
    transform(chunk, c) {
      ttfbMs ??= since(t);
      c.enqueue(chunk);
    },
  }));
  const up = await uploadStreamMultipart(d.store, key, timed, { partSize: partSizeOf(p, archived.delta?.changedBytes ?? archived.manifest.bytes), concurrency: p.tuning?.concurrency ?? 2 });
  if (archived.delta) await agent.deleteFile(archived.delta.list).catch(() => {});
  return { ms: since(t), bytes: up.bytes, sha256: up.sha256, parts: up.parts, ttfbMs };
}

/**
 * The agent cuts the live tar stream into equal parts and PUTs them in parallel to presigned part URLs; the Worker
 * only creates the upload (over the S3 API, which the agent's URLs address), signs URLs and completes or aborts.
 */
async function presignedMultipartTransfer(d: Deps, p: BackupParams, format: TarFormat, archived: ArchiveResult, key: string, t: number): Promise<TransferResult> {
  const agent = new AgentClient(d.transport, p.sandboxId);
  const s3 = s3Store(d.s3);
  // The archive is at most about the tree's size; 25% headroom and one spare part cover incompressible data.
  const expected = archived.manifest.bytes;
  const partSize = partSizeOf(p, expected);
  const count = Math.min(R2_MULTIPART.maxParts, Math.ceil((expected * 1.25) / partSize) + 1);
  const upload = await s3.createMultipartUpload(key);
  try {
    const urls = await Promise.all(
      Array.from({ length: count }, (_, i) => presign(d.s3, key, "PUT", d.config.PRESIGN_EXPIRY_SECONDS, { partNumber: String(i + 1), uploadId: upload.uploadId })),
    );
    const up = await agent.uploadMultipart({ source: { archive: { path: p.path, format } }, partSize, concurrency: p.tuning?.concurrency ?? 4, urls });
    // R2's equal-part rule, checked on what the agent reports before completing.
    const unequal = up.parts.slice(0, -1).find((part) => part.bytes !== partSize);
    if (unequal) throw new PartRuleError(`part ${unequal.partNumber} has ${unequal.bytes} bytes; every part but the last must have ${partSize}`);
    await upload.complete(up.parts.map(({ partNumber, etag }) => ({ partNumber, etag })));
    return { ms: since(t), bytes: up.bytes, sha256: up.sha256, parts: up.parts.length, agentPeakBufferedBytes: up.peakBufferedBytes };
  } catch (e) {
    await upload.abort().catch(() => {});
    throw e;
  }
}

/** The seeds' chunked baseline: 10 MiB chunk files, each read as base64 through the file API and decoded here. */
const SDK_CHUNK_BYTES = 10 * 2 ** 20;
async function sdkChunkedTransfer(d: Deps, p: BackupParams, archived: ArchiveResult, key: string, t: number): Promise<TransferResult> {
  const agent = new AgentClient(d.transport, p.sandboxId);
  const { chunks } = await agent.split(archived.staged!, SDK_CHUNK_BYTES);
  const upload = equalPartGuard(await d.store.createMultipartUpload(key), SDK_CHUNK_BYTES);
  try {
    const parts = [];
    let bytes = 0;
    for (const [i, chunk] of chunks.entries()) {
      const decoded = base64ToBytes(await d.transport.readFileBase64(p.sandboxId, chunk.path));
      parts.push(await upload.uploadPart(i + 1, decoded));
      bytes += decoded.byteLength;
      await agent.deleteFile(chunk.path).catch(() => {});
    }
    await upload.complete(parts);
    await agent.deleteFile(archived.staged!).catch(() => {});
    return { ms: since(t), bytes, sha256: archived.sha256!, parts: parts.length };
  } catch (e) {
    await upload.abort().catch(() => {});
    throw e;
  }
}

export async function verifyPhase(d: Deps, p: BackupParams, s: BackupStrategy, sent: TransferResult): Promise<StepResult> {
  const t = performance.now();
  const key = archiveKey(p.snapshotId, s.format);
  const head = await d.store.head(key);
  if (!head) throw new Error(`archive ${key} is not in the store after transfer`);
  // The sandbox reads the stored object back over a presigned URL and hashes it: a multi-gigabyte read stays out
  // of the Worker (whose CPU time is limited), and the check covers the same URL path restores use.
  const got = await new AgentClient(d.transport, p.sandboxId).hashUrl(await presign(d.s3, key, "GET", d.config.PRESIGN_EXPIRY_SECONDS));
  if (got.bytes !== sent.bytes || head.size !== sent.bytes || got.sha256 !== sent.sha256) {
    throw new PermanentError(`stored archive ${key} does not match what was sent: ${got.bytes} bytes sha256 ${got.sha256}, sent ${sent.bytes} bytes sha256 ${sent.sha256}`);
  }
  return { ms: since(t), bytes: got.bytes, sha256: got.sha256 };
}

export async function recordPhase(d: Deps, p: BackupParams, s: BackupStrategy, archived: ArchiveResult, sent: TransferResult, steps: Record<string, StepResult>): Promise<StepResult> {
  const t = performance.now();
  const { ms: _ms, manifestBytes: _mb, ...totals } = archived.manifest;
  const record: SnapshotRecord = {
    id: p.snapshotId,
    status: "good",
    createdAt: new Date().toISOString(),
    source: { sandboxId: p.sandboxId, path: p.path },
    strategy: s.name,
    format: s.format,
    archive: { key: archiveKey(p.snapshotId, s.format), bytes: sent.bytes, sha256: sent.sha256 },
    manifest: { key: manifestKey(p.snapshotId), ...totals },
    ...(archived.delta ? { delta: { kind: "changed-files" as const, base: p.baseSnapshotId!, changed: archived.delta.changed, deleted: archived.delta.deleted, deletedKey: deletedKey(p.snapshotId) } } : {}),
    ...(archived.archiveRoot ? { delta: { kind: "overlay-upper" as const, base: p.baseSnapshotId! } } : {}),
    steps,
  };
  await recordSnapshot(d.store, d.kv, record);
  return { ms: since(t), bytes: 0 };
}

/** After a failed backup: remove every object and staging file it may have written. Idempotent. */
export async function cleanupBackup(d: Deps, p: BackupParams, s: BackupStrategy): Promise<void> {
  await d.store.delete([archiveKey(p.snapshotId, s.format), manifestKey(p.snapshotId), deletedKey(p.snapshotId)]);
  await new AgentClient(d.transport, p.sandboxId).deleteFile(stagedArchive(p, s)).catch(() => {});
}
