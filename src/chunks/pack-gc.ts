// The pack collector: mark and sweep with a grace period, as the chunk collector (chunk-gc.ts) does for image chunks.
// A file-level snapshot owns only its index; its record lists every pack the index names (files.packs, checked at
// backup against its parent's list: files.ts), so marking reads records, not indexes (which are zstd, and the Worker
// does not decompress them).
//
//   mark   every recorded snapshot's packs, under its tenant.
//   sweep  every pack no record marks and written longer ago than the grace period. A running backup's own pack
//          is younger than that; the packs it reuses are its parent's, which the parent's record marks. Deleting a
//          snapshot in the middle of a lineage keeps its pack while a later snapshot's record names it.
//   recheck before deleting, records written since the mark listed them spare what they name.
//
// Per-pack liveness, no repacking: a pack goes only when no kept snapshot needs any chunk in it. A pack that is
// mostly dead stays whole while one chunk of it is live; the bound on that waste is the lineage's compaction (a new
// full backup, with no parent, writes a pack of its own and frees the old ones once the older snapshots expire).
import type { Deps } from "../deps.ts";
import type { ListedObject } from "../store/object-store.ts";
import type { SnapshotRecord } from "../snapshots/records.ts";
import { tenantOf } from "../snapshots/tenant.ts";
import { mapBounded } from "./bounded.ts";
import { DEFAULT_GRACE_SECONDS, READS_IN_FLIGHT, RECORD, type ChunkGcOptions } from "./chunk-gc.ts";
import { listEvery, SnapshotListing } from "./snapshot-listing.ts";
import { PACK_PREFIX, packOfKey } from "./pack-keys.ts";

const DELETE_BATCH = 100;

export interface PackGcReport {
  at: string;
  graceSeconds: number;
  dryRun: boolean;
  records: { read: number; readLate: number };
  packs: { listed: number; referenced: number; young: number; deleted: number; spared: number };
  bytesDeleted: number;
  ms: number;
}

/** "<tenant>/<name>" of every pack the records name. */
async function marks(listing: SnapshotListing, records: ListedObject[]): Promise<Set<string>> {
  const out = new Set<string>();
  const read = await mapBounded(records, READS_IN_FLIGHT, (o) => listing.json<Pick<SnapshotRecord, "tenant" | "files">>(o.key));
  for (const r of read) for (const x of r?.files?.packs ?? []) out.add(`${tenantOf(r!)}/${x.name}`);
  return out;
}

const recordsIn = (objects: ListedObject[]) => objects.filter((o) => RECORD.test(o.key));

/** `listing`: shared with the chunk collector when both run (collect-store.ts). */
export async function collectPacks(d: Deps, options: ChunkGcOptions = {}, listing = new SnapshotListing(d.store)): Promise<PackGcReport> {
  const started = performance.now();
  const now = (options.now ?? new Date()).getTime();
  const graceSeconds = options.graceSeconds ?? DEFAULT_GRACE_SECONDS;
  const cutoff = now - graceSeconds * 1000;

  const first = recordsIn(await listing.first());
  const marked = await marks(listing, first);
  const packs = (await listEvery(d.store, PACK_PREFIX)).flatMap((o) => {
    const pack = packOfKey(o.key);
    return pack ? [{ o, id: `${pack.tenant}/${pack.name}` }] : [];
  });
  let young = 0;
  const candidates = new Map<string, (typeof packs)[number]>();
  for (const x of packs) {
    if (marked.has(x.id)) continue;
    if (x.o.uploaded > cutoff) young++;
    else candidates.set(x.o.key, x);
  }

  // Recheck: records written since the first listing (backups recorded meanwhile) spare what they name.
  const seen = new Set(first.map((o) => o.key));
  const late = recordsIn(await listing.again()).filter((o) => !seen.has(o.key));
  const lateMarks = await marks(listing, late);
  let spared = 0;
  for (const [key, x] of candidates) if (lateMarks.has(x.id) && candidates.delete(key)) spared++;

  const doomed = [...candidates.values()].map((x) => x.o);
  if (!options.dryRun) {
    for (let i = 0; i < doomed.length; i += DELETE_BATCH) await d.store.delete(doomed.slice(i, i + DELETE_BATCH).map((o) => o.key));
  }
  return {
    at: new Date(now).toISOString(), graceSeconds, dryRun: options.dryRun ?? false,
    records: { read: first.length, readLate: late.length },
    packs: { listed: packs.length, referenced: marked.size, young, deleted: doomed.length, spared },
    bytesDeleted: doomed.reduce((n, o) => n + o.size, 0),
    ms: Math.round(performance.now() - started),
  };
}
