// Deleting a snapshot: its record, its objects (archive, manifest, deleted.json, marks), its mark on its base and
// its KV entry. Refused (snapshot_in_use, 409, naming them) while deltas need it — unless cascade, which
// deletes the dependants first, deepest first — or while a restore holds a lease on it (or on a dependant that
// cascade would delete). An overlay delta with a compaction is needed by none of its dependants (they resolve
// through the compaction, which their marks move to); a compaction is needed while deltas resolve through it
// (neededBy below).
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
import { compactionOf, compactsOf, removeCompactionPointer } from "./compactions.ts";
import { addDependant, listDependants, removeDependant } from "./dependants.ts";
import { putJson, readSnapshot, snapshotRecordKey, type SnapshotRecord } from "./records.ts";
import { releaseChunks } from "./release-chunks.ts";
import { activeLeases } from "./restore-leases.ts";
import { tenantOf } from "./tenant.ts";

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

/**
 * The snapshots that still need `record` (compactions.ts): its dependants — unless it is an overlay delta with a
 * compaction, through which they all resolve; a compaction is needed by the deltas marked on it (moved there when the
 * delta it compacts was deleted) and, while that delta exists, by its dependants (a sleep over a compacted delta
 * records the compaction alone as its chain).
 */
async function neededBy(d: Deps, record: SnapshotRecord): Promise<{ ids: string[]; compaction?: SnapshotRecord }> {
  const marked = await listDependants(d.store, record.id);
  if (marked.length && record.delta?.kind === "overlay-upper") {
    const compaction = await compactionOf(d, record.id, tenantOf(record));
    if (compaction) return { ids: [], compaction };
  }
  const compacted = compactsOf(record);
  // A compaction no pointer names (one that failed before it was pointed at, or was replaced) is what no chain
  // resolves through: only marks could need it.
  const pointed = compacted !== null && (await compactionOf(d, compacted, tenantOf(record)))?.id === record.id;
  if (pointed && (await readSnapshot(d.store, d.kv, compacted))) return { ids: [...new Set([...marked, ...(await listDependants(d.store, compacted))])] };
  return { ids: marked };
}

async function refuseIfDependants(d: Deps, record: SnapshotRecord): Promise<{ compaction?: SnapshotRecord }> {
  const needed = await neededBy(d, record);
  if (needed.ids.length) {
    const what = compactsOf(record) ? `the compaction ${needed.ids.join(", ")} resolve through` : `the base of ${needed.ids.join(", ")} (deltas that build on it)`;
    throw new SnapflowError("snapshot_in_use", `snapshot ${record.id} is ${what}; delete those first, or pass cascade: true to delete them with it`, { field: "id" });
  }
  return needed;
}

/** Deletes one snapshot whose dependants are gone, or resolve through its compaction (steps 2–4 above). */
async function deleteOne(d: Deps, record: SnapshotRecord): Promise<void> {
  await refuseIfDependants(d, record);
  await refuseIfHeld(d, [record.id]);
  await releaseChunks(d, record);
  await d.store.delete(snapshotRecordKey(record.id));
  let covered: SnapshotRecord | undefined;
  try {
    covered = (await refuseIfDependants(d, record)).compaction;
    await refuseIfHeld(d, [record.id]);
  } catch (e) {
    await putJson(d.store, snapshotRecordKey(record.id), record);
    throw e;
  }
  // Its dependants now need its compaction: their marks move there before its own go with its objects.
  if (covered) for (const id of await listDependants(d.store, record.id)) await addDependant(d.store, covered.id, id);
  await d.kv.delete(KV_KEYS.snapshot(record.id));
  await deleteObjects(d, `snapshots/${record.id}/`);
  if (record.delta) await removeDependant(d.store, record.delta.base, record.id);
  // A delta over a compacted parent that was deleted: its mark moved to the compaction.
  if (record.delta?.kind === "overlay-upper") {
    const c = await compactionOf(d, record.delta.base, tenantOf(record));
    if (c) await removeDependant(d.store, c.id, record.id);
  }
  if (compactsOf(record)) await removeCompactionPointer(d.store, record);
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
  // Without cascade, dependants that resolve through a compaction of it stay (deleteOne moves their marks).
  const dependants = options.cascade ? await dependantsDeepestFirst(d, id) : [];
  if (!options.cascade) await refuseIfDependants(d, record);
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
