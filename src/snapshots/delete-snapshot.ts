// Deleting a snapshot: its record, its objects (archive, manifest, deleted.json, marks), its mark on its base and
// its KV entry. Refused (snapshot_in_use, 409, naming them) while deltas build on it — unless cascade, which
// deletes the dependants first, deepest first — or while a restore holds a lease on it (or on a dependant that
// cascade would delete).
//
// Order, so that a snapshot never half-exists for readers and races are caught:
//   1. check dependants and leases (the common refusal, before anything changes)
//   2. delete the record: from here the snapshot does not exist (readSnapshot reads the store)
//   3. check dependants and leases again: a delta being recorded marks its base *before* checking the base's record,
//      and a restore takes its lease *before* reading the record, so either they saw no record (and fail), or we
//      see their mark or lease now — then the record is put back and the delete refused
//   4. delete the KV entry, hand chunks to the GC hook, delete the objects, remove the mark on the base
// A delete interrupted after 2 leaves objects without a record: a retry (or the cron's reconcile) finishes it.
import type { Deps } from "../deps.ts";
import { SnapflowError } from "../errors.ts";
import { KV_KEYS } from "../kv-keys.ts";
import { listDependants, removeDependant } from "./dependants.ts";
import { putJson, readSnapshot, snapshotRecordKey, type SnapshotRecord } from "./records.ts";
import { releaseChunks } from "./release-chunks.ts";
import { activeLeases } from "./restore-leases.ts";

export interface DeleteResult {
  /** in the order deleted: dependants before what they build on */
  deleted: string[];
}

/** Dependants of `id`, transitively, deepest first (each before the snapshot it builds on). */
async function dependantsDeepestFirst(d: Deps, id: string, seen = new Set<string>()): Promise<string[]> {
  const order: string[] = [];
  for (const child of await listDependants(d.store, id)) {
    if (seen.has(child)) continue;
    seen.add(child);
    order.push(...(await dependantsDeepestFirst(d, child, seen)), child);
  }
  return order;
}

async function refuseIfHeld(d: Deps, ids: string[]): Promise<void> {
  for (const id of ids) {
    const restores = await activeLeases(d.store, id);
    if (restores.length) {
      throw new SnapflowError("snapshot_in_use", `snapshot ${id} is being restored by ${restores.join(", ")}; delete it when the restore has ended`, { field: "id" });
    }
  }
}

async function refuseIfDependants(d: Deps, id: string): Promise<void> {
  const dependants = await listDependants(d.store, id);
  if (dependants.length) {
    throw new SnapflowError("snapshot_in_use", `snapshot ${id} is the base of ${dependants.join(", ")} (deltas that build on it); delete those first, or pass cascade: true to delete them with it`, { field: "id" });
  }
}

/** Deletes one snapshot whose dependants are gone (steps 2–4 above). */
async function deleteOne(d: Deps, record: SnapshotRecord): Promise<void> {
  await refuseIfDependants(d, record.id);
  await refuseIfHeld(d, [record.id]);
  await releaseChunks(d, record);
  await d.store.delete(snapshotRecordKey(record.id));
  try {
    await refuseIfDependants(d, record.id);
    await refuseIfHeld(d, [record.id]);
  } catch (e) {
    await putJson(d.store, snapshotRecordKey(record.id), record);
    throw e;
  }
  await d.kv.delete(KV_KEYS.snapshot(record.id));
  await deleteObjects(d, `snapshots/${record.id}/`);
  if (record.delta) await removeDependant(d.store, record.delta.base, record.id);
}

async function deleteObjects(d: Deps, prefix: string): Promise<number> {
  let n = 0;
  for (;;) {
    const page = await d.store.list(prefix);
    if (!page.objects.length) return n;
    await d.store.delete(page.objects.map((o) => o.key));
    n += page.objects.length;
  }
}

export async function deleteSnapshot(d: Deps, id: string, options: { cascade?: boolean } = {}): Promise<DeleteResult> {
  const record = await readSnapshot(d.store, d.kv, id);
  if (!record) {
    // No record: nothing exists for readers. Finish an interrupted delete (objects, a stale index entry), or 404.
    const indexed = (await d.kv.get(KV_KEYS.snapshot(id))) !== null;
    await d.kv.delete(KV_KEYS.snapshot(id));
    const leftovers = await deleteObjects(d, `snapshots/${id}/`);
    if (!indexed && !leftovers) throw new SnapflowError("not_found", `snapshot ${id} does not exist`, { field: "id" });
    return { deleted: [id] };
  }
  const dependants = await dependantsDeepestFirst(d, id);
  if (dependants.length && !options.cascade) await refuseIfDependants(d, id);
  await refuseIfHeld(d, [...dependants, id]);
  const deleted: string[] = [];
  for (const dep of dependants) {
    const r = await readSnapshot(d.store, d.kv, dep);
    if (r) await deleteOne(d, r);
    deleted.push(dep);
  }
  await deleteOne(d, record);
  deleted.push(id);
  return { deleted };
}
