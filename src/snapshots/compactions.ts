// Compactions of overlay chains (issue 24). A compaction C of an overlay delta D is a whole snapshot of D's tree
// (workflows/compact-workflow.ts: D woken in a compactor sandbox, verified, backed up whole) — squashfs-chunked over
// a chunked image, files-cas (reading only what the chain changed) over a file-level one — its record saying
// `compacts: D`. Once C is recorded, a pointer compactions/<D>.json names it: a delta whose chain
// passes through D then wakes as [C, the deltas after D] (overlay-chain.ts), D and the links below it are no longer
// needed by those deltas (delete-snapshot.ts), and the next sleep over it records the short chain.
//
// The pointer lives outside snapshots/<D>/ so that it outlives D: deltas recorded with D in their chain still find
// C after D is deleted. Deleting C removes it (the chain then resolves through its links again, if they are there).
import { z } from "zod";
import type { ObjectStore } from "../store/object-store.ts";
import { getJson, putJson, readSnapshot, type SnapshotRecord } from "./records.ts";
import { tenantOf } from "./tenant.ts";

const SnapshotId = z.string().regex(/^[a-z]{2}-\d{14}-[0-9a-f]{8}$/, "a snapshot id");

export const compactionKey = (delta: string) => `compactions/${delta}.json`;

const Pointer = z.object({ id: SnapshotId, compacts: SnapshotId, at: z.string() });

/** What a compaction's record says on top of a whole snapshot's (parsed, not cast: the store's JSON). */
const CompactionRecord = z.looseObject({ id: SnapshotId, compacts: SnapshotId, delta: z.never().optional(), format: z.looseObject({ kind: z.enum(["squashfs", "files"]) }) });

/** The compaction `record` is, or null when it is none (a plain snapshot). */
export function compactsOf(record: Pick<SnapshotRecord, "id" | "compacts" | "delta" | "format">): string | null {
  if (record.compacts === undefined) return null;
  const c = CompactionRecord.safeParse(record);
  return c.success ? c.data.compacts : null;
}

export async function pointCompaction(store: ObjectStore, compaction: Pick<SnapshotRecord, "id" | "compacts">): Promise<void> {
  await putJson(store, compactionKey(compaction.compacts!), Pointer.parse({ id: compaction.id, compacts: compaction.compacts, at: new Date().toISOString() }));
}

export async function removeCompactionPointer(store: ObjectStore, compaction: Pick<SnapshotRecord, "id" | "compacts">): Promise<void> {
  const key = compactionKey(compaction.compacts!);
  // Only its own pointer (a later compaction of the same delta may have replaced it).
  const p = Pointer.safeParse(await getJson(store, key));
  if (p.success && p.data.id === compaction.id) await store.delete(key);
}

/**
 * The good compaction of `delta` for `tenant`, or null: the pointer, and the record it names — recorded, the same
 * tenant's, a squashfs image or file-level snapshot saying it compacts this delta. Anything else is as if there were no compaction.
 */
export async function compactionOf(d: { store: ObjectStore; kv: KVNamespace }, delta: string, tenant: string): Promise<SnapshotRecord | null> {
  const p = Pointer.safeParse(await getJson(d.store, compactionKey(delta)));
  if (!p.success || p.data.compacts !== delta) return null;
  const record = await readSnapshot(d.store, d.kv, p.data.id);
  if (!record || tenantOf(record) !== tenant || compactsOf(record) !== delta) return null;
  return record;
}
