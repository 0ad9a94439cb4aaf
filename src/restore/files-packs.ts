// The packs a file-level snapshot's restore reads: GET URLs for each pack its record names, under the snapshot's own
// tenant (pack-keys.ts builds each key from the tenant and a checked name). The engine refuses an index whose chunks
// lie in a pack it has no URL for, so a restore reaches no pack its record does not list.
import { packKey } from "../chunks/pack-keys.ts";
import { SnapflowError } from "../errors.ts";
import { readSnapshot, type SnapshotRecord } from "../snapshots/records.ts";
import { tenantOf } from "../snapshots/tenant.ts";
import type { RestoreContext } from "./restore-context.ts";

export async function filesSnapshot(c: RestoreContext, id: string): Promise<SnapshotRecord & { files: NonNullable<SnapshotRecord["files"]> }> {
  const record = await readSnapshot(c.d.store, c.d.kv, id);
  if (!record) throw new SnapflowError("snapshot_unusable", `snapshot ${id} was deleted during its restore`);
  if (record.format.kind !== "files" || !record.files) throw new SnapflowError("snapshot_unusable", `snapshot ${id} is not a file-level snapshot`);
  return record as SnapshotRecord & { files: NonNullable<SnapshotRecord["files"]> };
}

export function packUrls(c: RestoreContext, record: SnapshotRecord & { files: NonNullable<SnapshotRecord["files"]> }): Record<string, string> {
  return signedPacks(c, packKeysOf(record));
}

/** Each pack a file-level record names, and its store key under the record's tenant. */
export function packKeysOf(record: SnapshotRecord & { files: NonNullable<SnapshotRecord["files"]> }): Record<string, string> {
  return Object.fromEntries(record.files.packs.map((x) => [x.name, packKey(tenantOf(record), x.name)]));
}

/** GET URLs for packs whose keys are known (packKeysOf, kept from a probe). */
export function signedPacks(c: RestoreContext, keys: Record<string, string>): Record<string, string> {
  const names = Object.keys(keys);
  const urls = c.d.presigner.gets(names.map((name) => keys[name]!));
  return Object.fromEntries(names.map((name, i) => [name, urls[i]!]));
}
