// The five phases of a backup, as plain functions of (deps, params, earlier results). run-backup.ts runs them in
// order; a Workflow runs each inside its own step.do.
//
//   probe    → can this sandbox run the strategy (tools)?                       agent GET /v1/probe
//   archive  → source manifest to the store; staging paths also archive to a file in the sandbox
//   transfer → archive bytes to the store, by the strategy's transfer path (transfer/*.ts)
//   verify   → the stored object has the size sent; read back and hashed unless the Worker hashed it on the way,
//              or the store keeps the checksum of the part hashes it checked at completion (presigned multipart)
//   record   → snapshot record in the store and index entry in KV: from here on the snapshot is "good"
import { storedSha256, WORKER_VERIFY_MAX_BYTES } from "../store/stored-sha256.ts";
import type { Deps } from "../deps.ts";
import { SnapflowError } from "../errors.ts";
import { checkStrategyRuns } from "../strategies/check-strategy-runs.ts";
import { since } from "../phases/phase-runner.ts";
import { AgentClient } from "../sandbox/agent-client.ts";
import { sandboxPaths } from "../sandbox/sandbox-paths.ts";
import { indexKey, packKey } from "../chunks/pack-keys.ts";
import { removeDependant } from "../snapshots/dependants.ts";
import { setFilesLineage } from "../snapshots/files-lineage.ts";
import { DEFAULT_TENANT } from "../snapshots/tenant.ts";
import { archiveKey, chunkRecordOf, deletedKey, indexSnapshot, manifestKey, readSnapshot, recordSnapshot, type SnapshotRecord, type StepResult } from "../snapshots/records.ts";
import { abortListedUploads, abortRecordedUploads, withUploadRecords } from "../store/upload-records.ts";
import type { BackupStrategy } from "../strategies/registry.ts";
import { ARCHIVE_PLANS, archivePlanOf, stagedArchive } from "./archive-plans.ts";
import type { ArchiveResult, BackupParams, TransferResult } from "./backup-params.ts";
import { backupAgent, checkSelection, selectionOf } from "./selection.ts";
import { BACKUP_TRANSFERS } from "./transfer/index.ts";

export async function probePhase(d: Deps, p: BackupParams, s: BackupStrategy): Promise<StepResult> {
  const t = performance.now();
  const agent = new AgentClient(d.transport, p.sandboxId);
  const probe = await agent.probe();
  checkStrategyRuns(s, probe, p.sandboxId, d.transport.kind);
  const selection = await checkSelection(agent, p);
  const ms = since(t);
  // Dropping caches (sync first) is preparation, not probing: its time is reported apart from the step's.
  const caches = p.dropCaches ? await agent.dropCaches() : undefined;
  return { ms, bytes: 0, ...selection, cpus: probe.cpus, kernel: probe.kernel, runtime: probe.runtime, ...(caches ? { cachesDropped: caches.dropped, cacheDropMs: caches.ms, ...(caches.reason ? { cacheReason: caches.reason } : {}) } : {}) };
}

/** The archive phase: the strategy's plan (archive-plans.ts), chosen once. */
export async function archivePhase(d: Deps, p: BackupParams, s: BackupStrategy): Promise<ArchiveResult> {
  const started = performance.now();
  return ARCHIVE_PLANS[archivePlanOf(s)]({ d, p, s, agent: backupAgent(d, p), started });
}

/**
 * Where a backup's own object goes: a file-level snapshot's index under its tenant's shared prefix (a later
 * snapshot's index may be a layer over it, and outlive it: pack-keys.ts), any other archive under its snapshot.
 */
export const storedArchiveKey = (p: BackupParams, s: BackupStrategy): string =>
  s.format.kind === "files" ? indexKey(p.tenant ?? DEFAULT_TENANT, p.snapshotId) : archiveKey(p.snapshotId, s.format);

export async function transferPhase(d: Deps, p: BackupParams, s: BackupStrategy, archived: ArchiveResult): Promise<TransferResult> {
  const started = performance.now();
  const agent = backupAgent(d, p);
  // Every multipart upload the path opens is recorded, so a cleanup can abort what a killed attempt left open.
  // An earlier attempt of this step that was cut off (its isolate killed, the stack stopped and resumed) left its
  // multipart uploads open, recorded: abort them now, or a run that then completes would leave them behind. An
  // attempt the engine gave up on (timed out) may still be writing into one; its result is discarded anyway.
  const stale = await abortRecordedUploads(d.store, p.snapshotId);
  if (stale) console.log(`backup ${p.snapshotId}: aborted ${stale} multipart upload(s) an earlier transfer attempt left open`);
  return BACKUP_TRANSFERS[s.path].transfer({ d: withUploadRecords(d, p.snapshotId), p, s, agent, archived, key: storedArchiveKey(p, s), started });
}

/** `workerHashMaxBytes`: objects up to this size are hashed by the Worker (a test lowers it to reach the larger-object branch). */
export async function verifyPhase(d: Deps, p: BackupParams, s: BackupStrategy, sent: TransferResult, workerHashMaxBytes = WORKER_VERIFY_MAX_BYTES): Promise<StepResult> {
  const t = performance.now();
  const key = storedArchiveKey(p, s);
  const head = await d.store.head(key);
  if (!head) throw new SnapflowError("transfer_damaged", `archive ${key} is not in the store after transfer`);
  if (head.size !== sent.bytes) {
    throw new SnapflowError("snapshot_unusable", `stored archive ${key} holds ${head.size} bytes, ${sent.bytes} were sent`);
  }
  // The Worker hashed the bytes itself as it handed them to the store: reading them back would be a second pass
  // that only re-checks the store's own durability. The size says the store holds all of them.
  if (BACKUP_TRANSFERS[s.path].hashedByWorker) {
    const more = await BACKUP_TRANSFERS[s.path].verifyStored?.({ d, p, key, sent });
    return { ms: since(t), bytes: head.size, sha256: sent.sha256, checked: "hashed by the Worker in the stream; stored size", ...more };
  }
  // The sandbox moved the bytes, so it must not grade its own work. A store that checked part hashes at completion
  // keeps their composite: one HEAD reads it back at any size (a different one stops the run here).
  const byStore = sent.storeChecksum ? await storeKeeps(d, key, sent.storeChecksum) : false;
  const byWorker = head.size <= workerHashMaxBytes;
  const more = () => BACKUP_TRANSFERS[s.path].verifyStored?.({ d, p, key, sent });
  // Then that check is the one made, at any size: reading the archive back would put it through the Worker after
  // all (the default backup's path exists to keep it out). The parts are what the sandbox reported, while the whole
  // archive's SHA-256 stays its word, which a restore checks the bytes against (a liar only spoils its own snapshot).
  if (byStore) {
    return { ms: since(t), bytes: head.size, sha256: sent.sha256, checked: `part SHA-256s checked by the store (${sent.storeChecksum})`, ...(await more()) };
  }
  // Otherwise the Worker hashes the stored object itself up to workerHashMaxBytes; above it, the sandbox
  // reads the object back over a presigned URL. Single PUTs are also bound to their hash by the store's checksum.
  const got = byWorker ? (await storedSha256(d.store, key))! : await new AgentClient(d.transport, p.sandboxId).hashUrl(await d.presigner.url(key, "GET"));
  if (got.bytes !== sent.bytes || got.sha256 !== sent.sha256) {
    throw new SnapflowError("snapshot_unusable", `stored archive ${key} does not match what was sent: ${got.bytes} bytes sha256 ${got.sha256}, sent ${sent.bytes} bytes sha256 ${sent.sha256}`);
  }
  const checked = byWorker ? "read back and hashed by the Worker" : "read back and hashed by the sandbox";
  return { ms: since(t), bytes: got.bytes, sha256: got.sha256, checked, ...(await more()) };
}

/**
 * Whether the store keeps `expected` as the object's SHA-256 checksum (the composite of the part hashes its
 * completion checked): true if so, false if it reports none (a store that keeps no checksums: the caller reads
 * the object back instead), and snapshot_unusable if it keeps another.
 */
async function storeKeeps(d: Deps, key: string, expected: string): Promise<boolean> {
  const kept = await d.presigner.storedChecksum(key);
  if (kept === null) return false;
  if (kept !== expected) throw new SnapflowError("snapshot_unusable", `stored archive ${key}: the store's SHA-256 checksum is ${kept}, the parts reported make ${expected}`);
  return true;
}

export async function recordPhase(d: Deps, p: BackupParams, s: BackupStrategy, archived: ArchiveResult, sent: TransferResult, steps: Record<string, StepResult>): Promise<StepResult> {
  const t = performance.now();
  // A single-pass streaming backup made its manifest (and found a delta's changes) during transfer.
  const { ms: _ms, manifestBytes: _mb, storeMs: _sm, ...totals } = (sent.manifest ?? archived.manifest)!;
  const delta = sent.delta ?? archived.delta;
  const now = new Date();
  const record: SnapshotRecord = {
    id: p.snapshotId,
    status: "good",
    createdAt: now.toISOString(),
    source: { sandboxId: p.sandboxId, path: p.path },
    tenant: p.tenant ?? DEFAULT_TENANT,
    strategy: s.name,
    format: s.format,
    archive: { key: storedArchiveKey(p, s), bytes: sent.bytes, sha256: sent.sha256, ...(sent.storeChecksum ? { storeChecksum: sent.storeChecksum } : {}) },
    manifest: { key: manifestKey(p.snapshotId), ...totals },
    ...(sent.chunks ? { chunks: chunkRecordOf(sent.chunks) } : {}),
    ...(sent.files ? { files: sent.files } : {}),
    ...(delta ? { delta: { kind: "changed-files" as const, base: p.baseSnapshotId!, changed: delta.changed, deleted: delta.deleted, deletedKey: deletedKey(p.snapshotId) } } : {}),
    ...(archived.archiveRoot ? { delta: { kind: "overlay-upper" as const, base: p.baseSnapshotId!, ...(archived.chain ? { chain: archived.chain } : {}) } } : {}),
    ...(p.compacts ? { compacts: p.compacts } : {}),
    ...(p.name ? { name: p.name } : {}),
    ...(p.labels ? { labels: p.labels } : {}),
    ...(p.ttl ? { expiresAt: new Date(now.getTime() + p.ttl * 1000).toISOString() } : {}),
    ...(selectionOf(p) ? { selection: selectionOf(p) } : {}),
    steps,
  };
  await recordSnapshot(d.store, d.kv, record);
  // The next file-level backup of this tree takes this one as its parent (files-parent.ts).
  // Of a wake's overlay that is still laid: the same layers hold every change since this one too.
  if (s.format.kind === "files") await setFilesLineage(d, p.sandboxId, p.path, p.snapshotId, "backup", sent.overWake);
  return { ms: since(t), bytes: 0 };
}

/**
 * After a failed backup: remove every object and staging file it may have written. Idempotent. A backup whose
 * record was written is good whatever failed after (its KV index entry, say): nothing of it is removed, only its
 * staging files, and the answer says so (success is final; the cron's reconcile brings KV into line).
 */
export async function cleanupBackup(d: Deps, p: BackupParams, s: BackupStrategy): Promise<{ recorded: boolean }> {
  const record = await readSnapshot(d.store, d.kv, p.snapshotId);
  if (record) {
    await indexSnapshot(d.kv, record).catch((e) => console.warn(`index entry of ${p.snapshotId} not written: ${e instanceof Error ? e.message : String(e)}`));
    await removeStaging(d, p, s, true);
    return { recorded: true };
  }
  await abortRecordedUploads(d.store, p.snapshotId);
  // A file-level backup's own pack is named by it and no record names it yet (the lineage moves only at the record),
  // so nothing else can need it: it goes now rather than at the collector's next run.
  const pack = s.format.kind === "files" ? [packKey(p.tenant ?? DEFAULT_TENANT, p.snapshotId)] : [];
  // And whatever upload at its own keys is still listed open (a late part PUT revives an aborted one on SeaweedFS).
  await abortListedUploads(d.presigner, [storedArchiveKey(p, s), ...pack]).catch((e) => console.warn(`open uploads of ${p.snapshotId} not listed: ${e instanceof Error ? e.message : String(e)}`));
  await d.store.delete([storedArchiveKey(p, s), manifestKey(p.snapshotId), deletedKey(p.snapshotId), ...pack]);
  if (p.baseSnapshotId) await removeDependant(d.store, p.baseSnapshotId, p.snapshotId);
  await removeStaging(d, p, s, false);
  return { recorded: false };
}

/** The backup's files in the sandbox's staging area (a recorded file-level snapshot's kept index stays: the next backup's parent). */
async function removeStaging(d: Deps, p: BackupParams, s: BackupStrategy, recorded: boolean): Promise<void> {
  const agent = new AgentClient(d.transport, p.sandboxId);
  // Chunks a failed chunked backup uploaded stay: others may share them, and the collector removes unreferenced
  // ones once they are older than its grace period (chunk-gc.ts).
  for (const file of [stagedArchive(p, s), sandboxPaths.deltaList(p.snapshotId), sandboxPaths.manifestOut(p.snapshotId), sandboxPaths.resultOut(p.snapshotId), sandboxPaths.chunkIndex(p.snapshotId), ...(s.format.kind === "files" && !recorded ? [sandboxPaths.filesIndex(p.snapshotId), sandboxPaths.filesStats(p.snapshotId)] : [])]) {
    // An agent that cannot be reached now leaves them to its own sweeper (container/system/sweep.ts): they are bounded.
    await agent.deleteFile(file).catch((e) => console.warn(`staging file ${file} of ${p.snapshotId} not removed: ${e instanceof Error ? e.message : String(e)}`));
  }
}
