// Where a snapshot's parts live and how runs are recorded.
//
// Store (the bucket):                      KV (INDEX):
//   snapshots/<id>/archive.<ext>             snapshot:<id>  → SnapshotSummary (only once verified: "good")
//   snapshots/<id>/manifest.json             run:<id>       → RunProgress (backup or restore, updated per step)
//   snapshots/<id>/snapshot.json  (record)
//   snapshots/<base>/dependants/<id>  (a delta on <base>: see dependants.ts)
//   restores/<id>.json            (record)
//
// The store is the source of truth: a snapshot exists when its record does (R2 is strongly consistent), and the
// record is written by the record step after verify passed; a failed run deletes what it wrote, so nothing
// half-made is ever listed. KV's entry is a cache for listing (its metadata carries the summary that filters
// read); delete-snapshot.ts and retention keep the two in agreement.
import type { ArchiveFormat, SelectionRecord, SelectionSpec } from "../../container/contract/protocol.ts";
import { SnapflowError } from "../errors.ts";
import { KV_KEYS } from "../kv-keys.ts";
import { writeAfterKvWindow } from "../kv-write-retry.ts";
import type { ObjectStore } from "../store/object-store.ts";
import { addDependant } from "./dependants.ts";
import type { Labels } from "./snapshot-meta.ts";

import { snapshotRecordKey } from "./snapshot-keys.ts";
export { archiveKey, deletedKey, manifestKey, restoreRecordKey, snapshotRecordKey } from "./snapshot-keys.ts";

import type { StepResult } from "../phases/step-result.ts";
export type { StepResult };

export interface SnapshotRecord {
  id: string;
  status: "good";
  createdAt: string;
  source: { sandboxId: string; path: string };
  /** whose snapshot this is (the API caller's word, tenant.ts): its chunks live under this tenant's prefix; absent: the default tenant */
  tenant?: string;
  strategy: string;
  format: ArchiveFormat;
  /**
   * storeChecksum: the SHA-256 checksum the store itself checked and keeps for the archive (a presigned multipart
   * upload: the composite of its part hashes, "base64-N"); backup verify found it in the store.
   */
  archive: { key: string; bytes: number; sha256: string; storeChecksum?: string };
  /**
   * `sha256`: the stored manifest's, where the backup bound its upload to it (a restore checks it on arrival);
   * `layerOf`: the manifest is a layer (version 2) over that snapshot's manifest, which a reader applies it to
   * (an overlay delta's, or a changed-files delta's: layer-chain.ts follows a chain of those; snapshots from before
   * layers hold the whole tree's manifest); `treeSha256`: beside a layer, the SHA-256 of the whole tree's manifest
   * the source sandbox keeps as the next delta's base (container/manifest/manifest-kept.ts); `fromIndex`: a file-level
   * snapshot's manifest is not stored (`key` names no object): the native engine makes it from the index at `key`
   * (checked against `sha256` there) and the selection record the backup's manifest held, byte for byte, so the
   * manifest's own `sha256` checks what it made (container/manifest/manifest-from-index.ts)
   */
  manifest: { key: string; files: number; dirs: number; symlinks: number; bytes: number; sha256?: string; layerOf?: string; treeSha256?: string; fromIndex?: ManifestFromIndex };
  /**
   * a chunked snapshot: `archive` is its index (snapshots/<id>/archive.sqsh.index.json, its SHA-256 kept above), the
   * chunks are shared by the tenant's snapshots under its prefix (chunks/chunk-keys.ts); the image they make up, and what this backup uploaded of them
   */
  chunks?: ChunkRecord;
  /** a file-level snapshot: `archive` is its index; the packs it names, and what this backup read and stored */
  files?: FilesRecord;
  /**
   * a delta: the snapshot it applies on top of. changed-files deltas keep their deletions beside the archive;
   * an overlay-upper delta is the overlay's upper directory, whose whiteouts are its deletions. Its `base` is its
   * parent, the snapshot its workspace was woken from: the image, or the overlay delta before it; `chain` lists what
   * it lays over, the image first, ending with `base` (absent: `[base]`, a delta from before chains). See
   * overlay-chain.ts.
   */
  delta?: { kind: "changed-files"; base: string; changed: number; deleted: number; deletedKey: string } | { kind: "overlay-upper"; base: string; chain?: string[]; deletedKey?: undefined };
  /** a compaction (compactions.ts): this whole image is the tree of that overlay delta, and its chain resolves through it */
  compacts?: string;
  name?: string;
  labels?: Labels;
  /** from the backup's ttl: the cron trigger deletes the snapshot after this (unless a kept snapshot builds on it) */
  expiresAt?: string;
  /** what the backup left out; the manifest records how many paths each rule excluded */
  selection?: SelectionSpec;
  /**
   * set by the first restore outside the source sandbox that hashed every file against the manifest (restore
   * verify, content-check.ts): from then on the image's own SHA-256 vouches for the tree, in any sandbox
   */
  contentChecked?: { sandboxId: string; restoreId: string; at: string };
  steps: Record<string, StepResult>;
}

/** Where a file-level snapshot's manifest is made from: its index (key and SHA-256, and a layer's chain), and its selection record. */
export interface ManifestFromIndex {
  key: string;
  sha256: string;
  chain?: IndexObject[];
  selection?: SelectionRecord;
}

/** One stored index object of a file-level chain: its key (pack-keys.ts indexKey) and SHA-256. */
export interface IndexObject {
  key: string;
  sha256: string;
}

export interface ChunkRecord {
  imageBytes: number;
  imageSha256: string;
  avg: number;
  /** chunks in the index, and distinct ones among them */
  count: number;
  distinct: number;
  /** the chunks the store lacked, which this backup uploaded */
  uploadedChunks: number;
  uploadedBytes: number;
  /** among the uploaded: chunks the store held with other bytes than their name, replaced (missing-chunks.ts) */
  replacedBad?: number;
  /** the distinct chunks a lazy mount reads before its tree answers (the head and the squashfs tables: mount-set.ts) */
  mountFirst?: string[];
}

/**
 * A file-level snapshot (native/lazy/internal/filecas): `packs` every pack its index names (packs/<tenant>/<name>,
 * the collector keeps them while a record lists them), `pack` the one this backup wrote (absent: nothing new),
 * `parent` the snapshot whose index it reused unchanged files' chunk lists from; `chain`: its index is a layer over
 * these objects, whole index first, ending with its parent's (filecas layer.go; the collector keeps them while a
 * record lists them: pack-gc.ts).
 */
export interface FilesRecord {
  parent?: string;
  chain?: IndexObject[];
  packs: { name: string; bytes: number }[];
  pack?: { name: string; bytes: number; sha256: string; storeChecksum?: string };
  chunks: number;
  newChunks: number;
  newBytes: number;
  read: { files: number; bytes: number };
  reused: { files: number; bytes: number };
}

/** What a snapshot record keeps of a chunked transfer's result (its timings stay in the steps). */
export function chunkRecordOf(c: ChunkRecord): ChunkRecord {
  const { imageBytes, imageSha256, avg, count, distinct, uploadedChunks, uploadedBytes, replacedBad, mountFirst } = c;
  return { imageBytes, imageSha256, avg, count, distinct, uploadedChunks, uploadedBytes, ...(replacedBad ? { replacedBad } : {}), ...(mountFirst ? { mountFirst } : {}) };
}

export type SnapshotSummary = Pick<SnapshotRecord, "id" | "createdAt" | "strategy" | "source" | "name" | "labels" | "expiresAt"> & {
  archiveBytes: number; files: number; bytes: number;
  /** a delta: the snapshot it builds on */
  base?: string;
  /** a compaction: the overlay delta whose tree it is (compactions.ts) */
  compacts?: string;
};

/** KV refuses list metadata over 1024 bytes: a longer summary (a long path) is kept as the value only. */
const KV_METADATA_LIMIT = 1024;

export function summaryOf(record: SnapshotRecord): SnapshotSummary {
  return {
    id: record.id, createdAt: record.createdAt, strategy: record.strategy, source: record.source,
    // A chunked snapshot's archive is its index: the image is what it stands for.
    archiveBytes: record.chunks?.imageBytes ?? record.archive.bytes, files: record.manifest.files, bytes: record.manifest.bytes,
    ...(record.name ? { name: record.name } : {}), ...(record.labels && Object.keys(record.labels).length ? { labels: record.labels } : {}),
    ...(record.expiresAt ? { expiresAt: record.expiresAt } : {}), ...(record.delta ? { base: record.delta.base } : {}),
    ...(record.compacts ? { compacts: record.compacts } : {}),
  };
}

/** The KV index entry of a recorded snapshot (idempotent: the same record gives the same entry). */
export async function indexSnapshot(kv: KVNamespace, record: SnapshotRecord): Promise<void> {
  const summary = summaryOf(record);
  const text = JSON.stringify(summary);
  const fits = new TextEncoder().encode(text).byteLength <= KV_METADATA_LIMIT;
  await kv.put(KV_KEYS.snapshot(record.id), text, { metadata: fits ? summary : { id: record.id, inValue: true } });
}

export type RunKind = "backup" | "restore";
export interface RunProgress {
  id: string;
  kind: RunKind;
  /** cancelled: stopped by POST /api/runs/:id/cancel, its cleanup done (runs/cancel-run.ts) */
  status: "running" | "complete" | "errored" | "cancelled";
  strategy: string;
  startedAt: string;
  /** when its outcome was final (the last progress write, complete or errored): a bench times a run to it */
  endedAt?: string;
  steps: Record<string, StepResult>;
  error?: string;
  /** backup: the snapshot made; restore: the snapshot restored */
  snapshotId?: string;
}

export async function putJson(store: ObjectStore, key: string, value: unknown): Promise<void> {
  await store.put(key, JSON.stringify(value, null, 1), { contentType: "application/json" });
}

export async function getJson<T>(store: ObjectStore, key: string): Promise<T | null> {
  const o = await store.get(key);
  return o ? ((await new Response(o.body).json()) as T) : null;
}

/** The store's record, read from the store (the source of truth; KV may lag a delete or an expiry by a moment). */
export async function readSnapshot(store: ObjectStore, _kv: KVNamespace, id: string): Promise<SnapshotRecord | null> {
  return getJson<SnapshotRecord>(store, snapshotRecordKey(id));
}

/**
 * Makes a verified snapshot exist: a delta first marks itself on its base and then checks the base is still there
 * (delete-snapshot.ts checks the marks after removing a record: one of the two always sees the other), then the
 * record, then the KV entry.
 */
export async function recordSnapshot(store: ObjectStore, kv: KVNamespace, record: SnapshotRecord): Promise<void> {
  if (record.delta) {
    await addDependant(store, record.delta.base, record.id);
    if (!(await store.head(snapshotRecordKey(record.delta.base)))) {
      throw new SnapflowError("snapshot_unusable", `base snapshot ${record.delta.base} was deleted while this delta was being made`, { field: "baseSnapshotId" });
    }
  }
  await putJson(store, snapshotRecordKey(record.id), record);
  // The record is the truth; the index entry is tried again after KV's one-write-per-second window (a retried
  // step rewrites it within the second). Still refused, the step fails and is retried; failing for good, the run's
  // cleanup sees the record (the snapshot is good) and the cron's reconcile indexes it from the store.
  await writeAfterKvWindow(() => indexSnapshot(kv, record));
}

export async function readProgress(kv: KVNamespace, id: string): Promise<RunProgress | null> {
  return kv.get<RunProgress>(KV_KEYS.run(id), "json");
}

export async function writeProgress(kv: KVNamespace, progress: RunProgress): Promise<void> {
  await kv.put(KV_KEYS.run(progress.id), JSON.stringify(progress));
}
