// The chunk collector: mark and sweep with a grace period. Chunks are shared (a snapshot owns only its index), so
// deleting a snapshot deletes its index and nothing else; this removes the chunks no index references any more.
//
//   mark   every index in the store: a recorded snapshot's, and a running backup's (a chunked backup writes its
//          index before it looks for the chunks it can reuse: chunked.ts). An index without a record older than
//          the grace period is a backup that died without its cleanup: it marks nothing. Chunks live per tenant
//          (chunk-keys.ts), so a recorded index marks its digests under its record's tenant only: the same content
//          under another tenant's key is another chunk, kept or freed by that tenant's snapshots. A running
//          backup's tenant is on no record yet: its index marks its digests under every tenant (it keeps, at worst,
//          another tenant's garbage one round longer; it never frees what a backup relies on).
//   sweep  every chunk that no index marked and that was written longer ago than the grace period. A chunk a
//          running backup just uploaded (its index may not name it yet: the upload and the index are not one
//          write) is younger than that, and so is safe; the grace period must exceed the longest backup.
//   recheck before deleting, the indexes written since the mark began are read too, and their chunks spared: a
//          backup that started meanwhile may have found a marked-dead chunk present and be about to reuse it.
//
// Why not reference counts with a lease: a count per chunk is a read-modify-write on every backup and delete, which
// the store cannot make atomic (no conditional writes across objects), and a count lost to a crash leaks or, worse,
// frees a chunk in use. Mark and sweep needs no write on the backup path and is always correct for what it marks;
// the remaining window — a backup that found a chunk present after the recheck listed the indexes, while the sweep
// deletes it — is closed by the backup's verify step, which HEADs every chunk again before the record is written
// (a chunk gone then fails the step, and its retry uploads it again).
import { ChunkIndex } from "../../container/contract/protocol.ts";
import type { Deps } from "../deps.ts";
import type { ListedObject, ObjectStore } from "../store/object-store.ts";
import { mapBounded } from "./bounded.ts";
import { CHUNK_PREFIX, chunkOfKey } from "./chunk-keys.ts";
import { SnapflowError } from "../errors.ts";
import { getJson } from "../snapshots/records.ts";
import { snapshotRecordKey } from "../snapshots/snapshot-keys.ts";
import { tenantOf } from "../snapshots/tenant.ts";
import { listEvery, SnapshotListing } from "./snapshot-listing.ts";

/** A day: far longer than any backup (its steps time out in at most an hour each) and short enough to reclaim space daily. */
export const DEFAULT_GRACE_SECONDS = 24 * 3600;

/** A chunked snapshot's index key, and a snapshot's record key: the snapshot id is the first group. */
export const INDEX = /^snapshots\/([^/]+)\/archive\.[a-z.]*index\.json$/;
export const RECORD = /^snapshots\/([^/]+)\/snapshot\.json$/;
export const READS_IN_FLIGHT = 8;
/** Keys per delete call (the S3 store sends one DELETE per key, in parallel): a bounded burst. */
const DELETE_BATCH = 100;

export interface ChunkGcOptions {
  /** chunks written less than this long ago are never deleted */
  graceSeconds?: number;
  /** the collector's idea of now (the cron trigger's scheduled time) */
  now?: Date;
  /** report what would be deleted, delete nothing */
  dryRun?: boolean;
}

export interface ChunkGcReport {
  at: string;
  graceSeconds: number;
  dryRun: boolean;
  /** indexes that marked: with a record, and of backups still running (no record yet, younger than the grace) */
  indexes: { recorded: number; pending: number; abandoned: number; readLate: number };
  chunks: { listed: number; referenced: number; young: number; deleted: number; spared: number };
  bytesDeleted: number;
  ms: number;
}

/** The digests an index names; an index that vanished meanwhile (its snapshot deleted) names none. */
export async function digestsOf(store: ObjectStore, key: string): Promise<string[]> {
  const o = await store.get(key);
  if (!o) return [];
  const parsed = ChunkIndex.safeParse(await new Response(o.body).json().catch(() => null));
  // An index that does not parse cannot say what it needs: refuse to sweep rather than guess.
  if (!parsed.success) throw new SnapflowError("snapshot_unusable", `chunk index ${key} does not parse; the collector will not sweep while it cannot read every index`);
  return parsed.data.chunks.map((c) => c.sha256);
}

/** The indexes under snapshots/ (as listed) that mark: recorded ones, and recent ones of backups still running. */
function liveIndexes(objects: ListedObject[], cutoff: number) {
  const recorded = new Set(objects.flatMap((o) => RECORD.exec(o.key)?.[1] ?? []));
  const indexes = objects.filter((o) => INDEX.test(o.key));
  const live = indexes.filter((o) => recorded.has(INDEX.exec(o.key)![1]!) || o.uploaded > cutoff);
  return { all: new Set(indexes.map((o) => o.key)), live, recordedIds: recorded, recorded: live.filter((o) => recorded.has(INDEX.exec(o.key)![1]!)).length, abandoned: indexes.length - live.length };
}

/**
 * The tenant whose chunks an index names: its snapshot record's, or null (every tenant) for a backup still running
 * or a record deleted since the listing (marking broadly is the safe side).
 */
export async function indexTenant(store: ObjectStore, indexKey: string, recorded: ReadonlySet<string>, read = <T>(key: string) => getJson<T>(store, key)): Promise<string | null> {
  const id = INDEX.exec(indexKey)![1]!;
  if (!recorded.has(id)) return null;
  const record = await read<{ tenant?: string }>(snapshotRecordKey(id));
  return record ? tenantOf(record) : null;
}

/** Marked digests per tenant, and those marked under every tenant (running backups'). */
class Marks {
  private readonly byTenant = new Map<string, Set<string>>();
  private readonly everyTenant = new Set<string>();
  add(tenant: string | null, digests: readonly string[]): void {
    let set = tenant === null ? this.everyTenant : this.byTenant.get(tenant);
    if (!set) this.byTenant.set(tenant!, (set = new Set()));
    for (const x of digests) set.add(x);
  }
  has(tenant: string, digest: string): boolean {
    return this.everyTenant.has(digest) || (this.byTenant.get(tenant)?.has(digest) ?? false);
  }
  get size(): number {
    return this.everyTenant.size + [...this.byTenant.values()].reduce((n, s) => n + s.size, 0);
  }
}

async function mark(listing: SnapshotListing, indexes: ListedObject[], recorded: ReadonlySet<string>, marks: Marks): Promise<void> {
  const { store } = listing;
  const read = await mapBounded(indexes, READS_IN_FLIGHT, async (o) => ({ tenant: await indexTenant(store, o.key, recorded, (key) => listing.json(key)), digests: await digestsOf(store, o.key) }));
  for (const { tenant, digests } of read) marks.add(tenant, digests);
}

/** `listing`: shared with the pack collector when both run (collect-store.ts). */
export async function collectChunks(d: Deps, options: ChunkGcOptions = {}, listing = new SnapshotListing(d.store)): Promise<ChunkGcReport> {
  const started = performance.now();
  const now = (options.now ?? new Date()).getTime();
  const graceSeconds = options.graceSeconds ?? DEFAULT_GRACE_SECONDS;
  const cutoff = now - graceSeconds * 1000;

  // Mark.
  const first = liveIndexes(await listing.first(), cutoff);
  const marked = new Marks();
  await mark(listing, first.live, first.recordedIds, marked);

  // Sweep candidates: chunk keys of either form (anything else under chunks/ is not ours to judge), unmarked under
  // their own tenant, and older than the grace period.
  const chunks = (await listEvery(d.store, CHUNK_PREFIX)).flatMap((o) => {
    const chunk = chunkOfKey(o.key);
    return chunk ? [{ o, ...chunk }] : [];
  });
  let young = 0;
  const candidates = new Map<string, { o: ListedObject; tenant: string; digest: string }>();
  for (const c of chunks) {
    if (marked.has(c.tenant, c.digest)) continue;
    if (c.o.uploaded > cutoff) young++;
    else candidates.set(c.o.key, c);
  }

  // Recheck: indexes written since the mark listed them (backups that started meanwhile) spare what they name.
  const again = liveIndexes(await listing.again(), cutoff);
  const late = again.live.filter((o) => !first.all.has(o.key));
  const lateMarks = new Marks();
  await mark(listing, late, again.recordedIds, lateMarks);
  let spared = 0;
  for (const [key, c] of candidates) {
    if (lateMarks.has(c.tenant, c.digest) && candidates.delete(key)) spared++;
  }

  const doomed = [...candidates.values()].map((c) => c.o);
  if (!options.dryRun) {
    for (let i = 0; i < doomed.length; i += DELETE_BATCH) await d.store.delete(doomed.slice(i, i + DELETE_BATCH).map((o) => o.key));
  }
  return {
    at: new Date(now).toISOString(), graceSeconds, dryRun: options.dryRun ?? false,
    indexes: { recorded: first.recorded, pending: first.live.length - first.recorded, abandoned: first.abandoned, readLate: late.length },
    chunks: { listed: chunks.length, referenced: marked.size, young, deleted: doomed.length, spared },
    bytesDeleted: doomed.reduce((n, o) => n + o.size, 0),
    ms: Math.round(performance.now() - started),
  };
}

