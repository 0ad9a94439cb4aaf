// Where a snapshot's parts live and how runs are recorded.
//
// Store (the bucket):                      KV (INDEX):
//   snapshots/<id>/archive.<ext>             snapshot:<id>  → SnapshotSummary (only once verified: "good")
//   snapshots/<id>/manifest.json             run:<id>       → RunProgress (backup or restore, updated per step)
//   snapshots/<id>/snapshot.json  (record)
//   restores/<id>.json            (record)
//
// A snapshot exists for readers only when its record and its KV entry exist, and both are written by the
// record step after verify passed; a failed run deletes what it wrote, so nothing half-made is ever listed.
import type { ArchiveFormat } from "../../container/protocol.ts";
import { archiveExtension } from "../../container/tar-argv.ts";
import type { ObjectStore } from "../store/object-store.ts";

/** The file extension of an archive format: tar.zst, tar.gz, …, sqsh, erofs. */
export const extensionOf = (format: ArchiveFormat) => (format.kind === "tar" ? archiveExtension(format) : format.kind === "squashfs" ? "sqsh" : "erofs");
export const archiveKey = (id: string, format: ArchiveFormat) => `snapshots/${id}/archive.${extensionOf(format)}`;
export const manifestKey = (id: string) => `snapshots/${id}/manifest.json`;
export const snapshotRecordKey = (id: string) => `snapshots/${id}/snapshot.json`;
/** a delta's deleted paths (relative to the tree), removed before its archive is extracted */
export const deletedKey = (id: string) => `snapshots/${id}/deleted.json`;
export const restoreRecordKey = (id: string) => `restores/${id}.json`;

/** What every step returns: small JSON with its own measured time and bytes. */
export interface StepResult {
  ms: number;
  bytes: number;
  [detail: string]: unknown;
}

export interface SnapshotRecord {
  id: string;
  status: "good";
  createdAt: string;
  source: { sandboxId: string; path: string };
  strategy: string;
  format: ArchiveFormat;
  archive: { key: string; bytes: number; sha256: string };
  manifest: { key: string; files: number; dirs: number; symlinks: number; bytes: number };
  /**
   * a delta: the snapshot it applies on top of. changed-files deltas keep their deletions beside the archive;
   * an overlay-upper delta is the overlay's upper directory, whose whiteouts are its deletions.
   */
  delta?: { kind: "changed-files"; base: string; changed: number; deleted: number; deletedKey: string } | { kind: "overlay-upper"; base: string; deletedKey?: undefined };
  steps: Record<string, StepResult>;
}

export type SnapshotSummary = Pick<SnapshotRecord, "id" | "createdAt" | "strategy" | "source"> & { archiveBytes: number; files: number; bytes: number };

export type RunKind = "backup" | "restore";
export interface RunProgress {
  id: string;
  kind: RunKind;
  status: "running" | "complete" | "errored";
  strategy: string;
  startedAt: string;
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

export async function readSnapshot(store: ObjectStore, kv: KVNamespace, id: string): Promise<SnapshotRecord | null> {
  // KV first: a snapshot is good only when indexed, whatever objects may linger in the store.
  if (!(await kv.get(`snapshot:${id}`))) return null;
  return getJson<SnapshotRecord>(store, snapshotRecordKey(id));
}

export async function recordSnapshot(store: ObjectStore, kv: KVNamespace, record: SnapshotRecord): Promise<void> {
  await putJson(store, snapshotRecordKey(record.id), record);
  const summary: SnapshotSummary = {
    id: record.id, createdAt: record.createdAt, strategy: record.strategy, source: record.source,
    archiveBytes: record.archive.bytes, files: record.manifest.files, bytes: record.manifest.bytes,
  };
  await kv.put(`snapshot:${record.id}`, JSON.stringify(summary), { metadata: summary });
}

export async function listSnapshots(kv: KVNamespace, cursor?: string, limit = 100): Promise<{ snapshots: SnapshotSummary[]; cursor?: string }> {
  const r = await kv.list<SnapshotSummary>({ prefix: "snapshot:", cursor, limit });
  return { snapshots: r.keys.map((k) => k.metadata!).filter(Boolean), cursor: r.list_complete ? undefined : r.cursor };
}

export async function readProgress(kv: KVNamespace, id: string): Promise<RunProgress | null> {
  return kv.get<RunProgress>(`run:${id}`, "json");
}

export async function writeProgress(kv: KVNamespace, progress: RunProgress): Promise<void> {
  await kv.put(`run:${progress.id}`, JSON.stringify(progress));
}
