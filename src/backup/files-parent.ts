// The parent of a file-level backup: the snapshot whose index lends unchanged files their chunk lists (restic's
// parent). Named by the request (baseSnapshotId), or else the file-level snapshot the tree at this sandbox's path last
// came from or went to (files-lineage.ts: its last file-level backup, or the restore that made it), of the same tenant. Any parent gives an exact snapshot (a file's chunks are reused only when its metadata says it is
// unchanged, and every chunk is named by its SHA-256); a missing or older one only costs reading more files.
import type { Deps } from "../deps.ts";
import { SnapflowError } from "../errors.ts";
import { filesLineage, type WakeOverlay } from "../snapshots/files-lineage.ts";
import { readSnapshot, type IndexObject, type SnapshotRecord } from "../snapshots/records.ts";
import { tenantOf } from "../snapshots/tenant.ts";
import type { BackupParams } from "./backup-params.ts";

export interface FilesParent {
  id: string;
  /** its index: the store key and the SHA-256 its record keeps */
  key: string;
  indexSha256: string;
  /** when its index is a layer: the objects beneath it, whole index first */
  chain: IndexObject[];
  packs: { name: string; bytes: number }[];
  /** its tree's totals (its manifest's): a bound on this backup's pack that needs no walk */
  totals: { files: number; dirs: number; symlinks: number; bytes: number };
  /** the tree was, when the lineage was last set, a wake's overlay over this parent's tree (files-lineage.ts); by: who set it */
  wake?: WakeOverlay & { by: "backup" | "restore" };
}

const usable = (r: SnapshotRecord | null, p: BackupParams): r is SnapshotRecord & { files: NonNullable<SnapshotRecord["files"]> } =>
  !!r && r.format.kind === "files" && !!r.files && tenantOf(r) === (p.tenant ?? tenantOf({})) && r.id !== p.snapshotId;

export async function filesParent(d: Deps, p: BackupParams): Promise<FilesParent | undefined> {
  let record: SnapshotRecord | null = null;
  // The lineage is read either way: a named parent that is the lineage's keeps the wake's overlay it names.
  const lineage = filesLineage(d, p.sandboxId, p.path);
  if (p.baseSnapshotId) {
    record = await readSnapshot(d.store, d.kv, p.baseSnapshotId);
    if (!usable(record, p)) throw new SnapflowError("snapshot_unusable", `baseSnapshotId: ${p.baseSnapshotId} is not a file-level snapshot of this tenant (or was deleted)`, { field: "baseSnapshotId" });
  } else {
    const last = await lineage;
    if (last) record = await readSnapshot(d.store, d.kv, last.snapshotId);
  }
  if (!usable(record, p)) return undefined;
  const last = await lineage;
  const wake = last?.overlay && last.snapshotId === record.id ? { ...last.overlay, by: last.by } : undefined;
  const { files, dirs, symlinks, bytes } = record.manifest;
  return { id: record.id, key: record.archive.key, indexSha256: record.archive.sha256, chain: record.files.chain ?? [], packs: record.files.packs, totals: { files, dirs, symlinks, bytes }, ...(wake ? { wake } : {}) };
}
