// Whose word a restore takes for a snapshot's content. A tar restore compares every entry's hash with the manifest
// as the bytes stream into tar, so its content is always checked. An image (squashfs, erofs; mounted, extracted or
// lazy) is checked by its own SHA-256 on arrival (or per chunk), which proves it is the image the backup stored, not
// that it holds what the manifest says: the source sandbox made both, and a compromised one can upload an honest
// image beside a manifest that lies (issue 21). A liar may spoil its own snapshot, but must never get it restored
// as good elsewhere. So the first restore of an image into any sandbox other than its source hashes every file
// against the manifest (deepVerify), and records that it did; later restores anywhere trust the image's SHA-256.
// Restoring into the source sandbox itself needs no such check: it can only lie to itself.
import type { Deps } from "../deps.ts";
import { getJson, putJson, snapshotRecordKey, type SnapshotRecord } from "../snapshots/records.ts";
import type { RestoreParams } from "./restore-params.ts";

/** Why this restore must hash every file, or undefined when the image's SHA-256 (or the stream check) suffices. */
export function contentCheckReason(snapshot: Pick<SnapshotRecord, "source" | "contentChecked">, p: Pick<RestoreParams, "sandboxId" | "deepVerify">): string | undefined {
  if (p.deepVerify) return "deepVerify";
  if (snapshot.source.sandboxId === p.sandboxId || snapshot.contentChecked) return undefined;
  return `first restore outside ${snapshot.source.sandboxId}, the sandbox that made it`;
}

/** Records on the snapshot that its content was checked against its manifest outside its source. Repeatable. */
export async function recordContentChecked(d: Deps, p: Pick<RestoreParams, "snapshotId" | "sandboxId" | "restoreId">): Promise<void> {
  const key = snapshotRecordKey(p.snapshotId);
  const record = await getJson<SnapshotRecord>(d.store, key);
  if (!record || record.contentChecked) return;
  await putJson(d.store, key, { ...record, contentChecked: { sandboxId: p.sandboxId, restoreId: p.restoreId, at: new Date().toISOString() } });
}

/**
 * A file-level snapshot whose index is a layer (filecas/layer.go) holds, entry for entry, the index beneath it except
 * the names its layer sets. When that index beneath was itself checked (its record says so, and it is that very
 * object), only those names need hashing: a sleep's content check costs what the sleep changed, not the whole tree
 * (the npm workspace's 0.5–1.5 GB hashed on every wake of a 100-cycle chain before). Answers the snapshot beneath,
 * or undefined when the whole tree must be hashed.
 */
export async function checkedBeneath(d: Deps, chain: { key: string; sha256: string }[] | undefined): Promise<string | undefined> {
  const below = chain?.at(-1);
  if (!below) return undefined;
  const id = below.key.split("/").at(-1)!;
  const record = await getJson<SnapshotRecord>(d.store, snapshotRecordKey(id)).catch(() => null);
  return record?.contentChecked && record.archive.key === below.key && record.archive.sha256 === below.sha256 ? id : undefined;
}
