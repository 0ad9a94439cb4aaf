// The pack collector: mark and sweep with a grace period, as the chunk collector (chunk-gc.ts) does for image chunks,
// over the file-level format's shared objects (pack-keys.ts): packs, and index objects.
// A file-level snapshot's record lists every pack its index names (files.packs, checked at backup against its
// parent's list: files.ts), its own index (archive.key) and, when that index is a layer, the index objects beneath it
// (files.chain); so marking reads records, not indexes (which are zstd, and the Worker does not decompress them).
//
//   mark   every recorded snapshot's packs and index objects, under its tenant.
//   sweep  every pack or index no record marks and written longer ago than the grace period. A running backup's own
//          pack and index are younger than that; the packs and indexes it builds on are its parent's, which the
//          parent's record marks. Deleting a snapshot in the middle of a lineage keeps its pack while a later
//          snapshot's record names it, and its index while a later snapshot's index is a layer over it.
//   recheck before deleting, records written since the mark listed them spare what they name.
//
// Per-pack liveness, no repacking: a pack goes only when no kept snapshot needs any chunk in it. A pack that is
// mostly dead stays whole while one chunk of it is live; the bound on that waste is the lineage's compaction (a new
// full backup, with no parent, writes a pack of its own and frees the old ones once the older snapshots expire), and
// a chain written whole again (a compaction; layers past FILES_MAX_DEPTH that outgrew their rebase) names only the
// chunks its entries use.
import type { Deps } from "../deps.ts";
import type { ListedObject } from "../store/object-store.ts";
import type { SnapshotRecord } from "../snapshots/records.ts";
import { tenantOf } from "../snapshots/tenant.ts";
import { mapBounded } from "./bounded.ts";
import { DEFAULT_GRACE_SECONDS, READS_IN_FLIGHT, RECORD, type ChunkGcOptions } from "./chunk-gc.ts";
import { listEvery, SnapshotListing } from "./snapshot-listing.ts";
import { INDEX_PREFIX, nameOfKey, PACK_PREFIX } from "./pack-keys.ts";

const DELETE_BATCH = 100;

export interface SweepCounts { listed: number; referenced: number; young: number; deleted: number; spared: number }

export interface PackGcReport {
  at: string;
  graceSeconds: number;
  dryRun: boolean;
  records: { read: number; readLate: number };
  packs: SweepCounts;
  indexes: SweepCounts;
  bytesDeleted: number;
  ms: number;
}

type Marks = { packs: Set<string>; indexes: Set<string> };

/** "<tenant>/<name>" of every pack and index object the records name. */
async function marks(listing: SnapshotListing, records: ListedObject[]): Promise<Marks> {
  const out: Marks = { packs: new Set(), indexes: new Set() };
  const read = await mapBounded(records, READS_IN_FLIGHT, (o) => listing.json<Pick<SnapshotRecord, "tenant" | "files" | "archive">>(o.key));
  for (const r of read) {
    if (!r?.files) continue;
    for (const x of r.files.packs) out.packs.add(`${tenantOf(r)}/${x.name}`);
    for (const o of [r.archive, ...(r.files.chain ?? [])]) {
      const named = nameOfKey(INDEX_PREFIX, o.key);
      if (named) out.indexes.add(`${named.tenant}/${named.name}`);
    }
  }
  return out;
}

const recordsIn = (objects: ListedObject[]) => objects.filter((o) => RECORD.test(o.key));

/** The objects under `prefix` no mark names and older than the cutoff, and the counts. */
async function unmarked(d: Deps, prefix: string, marked: Set<string>, cutoff: number) {
  const listed = (await listEvery(d.store, prefix)).flatMap((o) => {
    const named = nameOfKey(prefix, o.key);
    return named ? [{ o, id: `${named.tenant}/${named.name}` }] : [];
  });
  let young = 0;
  const candidates = new Map<string, (typeof listed)[number]>();
  for (const x of listed) {
    if (marked.has(x.id)) continue;
    if (x.o.uploaded > cutoff) young++;
    else candidates.set(x.o.key, x);
  }
  return { candidates, counts: { listed: listed.length, referenced: marked.size, young, deleted: 0, spared: 0 } };
}

/** `listing`: shared with the chunk collector when both run (collect-store.ts). */
export async function collectPacks(d: Deps, options: ChunkGcOptions = {}, listing = new SnapshotListing(d.store)): Promise<PackGcReport> {
  const started = performance.now();
  const now = (options.now ?? new Date()).getTime();
  const graceSeconds = options.graceSeconds ?? DEFAULT_GRACE_SECONDS;
  const cutoff = now - graceSeconds * 1000;

  const first = recordsIn(await listing.first());
  const marked = await marks(listing, first);
  const [packs, indexes] = await Promise.all([unmarked(d, PACK_PREFIX, marked.packs, cutoff), unmarked(d, INDEX_PREFIX, marked.indexes, cutoff)]);

  // Recheck: records written since the first listing (backups recorded meanwhile) spare what they name.
  const seen = new Set(first.map((o) => o.key));
  const late = recordsIn(await listing.again()).filter((o) => !seen.has(o.key));
  const lateMarks = await marks(listing, late);
  for (const [sweep, spare] of [[packs, lateMarks.packs], [indexes, lateMarks.indexes]] as const) {
    for (const [key, x] of sweep.candidates) if (spare.has(x.id) && sweep.candidates.delete(key)) sweep.counts.spared++;
  }

  const doomed = [...packs.candidates.values(), ...indexes.candidates.values()].map((x) => x.o);
  if (!options.dryRun) {
    for (let i = 0; i < doomed.length; i += DELETE_BATCH) await d.store.delete(doomed.slice(i, i + DELETE_BATCH).map((o) => o.key));
  }
  packs.counts.deleted = packs.candidates.size;
  indexes.counts.deleted = indexes.candidates.size;
  return {
    at: new Date(now).toISOString(), graceSeconds, dryRun: options.dryRun ?? false,
    records: { read: first.length, readLate: late.length },
    packs: packs.counts, indexes: indexes.counts,
    bytesDeleted: doomed.reduce((n, o) => n + o.size, 0),
    ms: Math.round(performance.now() - started),
  };
}
