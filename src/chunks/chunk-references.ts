// Which snapshots reference a chunk: asked when a restore meets a chunk it cannot have (missing, or bytes that are
// not its name), so that the error says which other snapshots are damaged with it — the chunk is shared, and a
// backup that has its content again repairs them all (missing-chunks.ts uploads it anew). The collector's listing
// and index reader (chunk-gc.ts) do the work; only recorded snapshots are named (a backup still running has no
// record yet), and at most MAX_INDEXES indexes are read, so a failing restore does not turn into a store scan of
// unbounded length: the answer then says how many it read of how many. Chunks live per tenant (chunk-keys.ts): only
// the asking snapshot's tenant's snapshots share its chunk, and only they are named (another tenant's snapshot ids
// are not this restore's to learn).
import type { ObjectStore } from "../store/object-store.ts";
import { mapBounded } from "./bounded.ts";
import { digestsOf, INDEX, indexTenant, READS_IN_FLIGHT, RECORD } from "./chunk-gc.ts";
import { listEvery } from "./snapshot-listing.ts";

/** Indexes read at most for one answer (each a small GET: 8,686 chunks make a ~1 MB index). */
export const MAX_INDEXES = 1000;

const DIGEST = /^[0-9a-f]{64}$/;

export interface ChunkReferences {
  /** per asked digest, the recorded snapshots whose indexes name it, in key order */
  bySnapshot: Record<string, string[]>;
  /** indexes read, and recorded indexes there are: fewer read means the list may be incomplete */
  read: number;
  indexes: number;
}

export async function snapshotsReferencing(store: ObjectStore, tenant: string, digests: readonly string[], options: { maxIndexes?: number } = {}): Promise<ChunkReferences> {
  // The digests come from a sandbox's helper status: only digests are looked up.
  const wanted = new Set(digests.filter((x) => DIGEST.test(x)));
  const bySnapshot: Record<string, string[]> = Object.fromEntries([...wanted].map((x) => [x, []]));
  if (!wanted.size) return { bySnapshot, read: 0, indexes: 0 };
  const objects = await listEvery(store, "snapshots/");
  const recorded = new Set(objects.flatMap((o) => RECORD.exec(o.key)?.[1] ?? []));
  const indexes = objects.filter((o) => recorded.has(INDEX.exec(o.key)?.[1] ?? ""));
  const reading = indexes.slice(0, options.maxIndexes ?? MAX_INDEXES);
  await mapBounded(reading, READS_IN_FLIGHT, async (o) => {
    // Another tenant's snapshot (or one whose record vanished meanwhile) shares nothing with this one.
    if ((await indexTenant(store, o.key, recorded).catch(() => null)) !== tenant) return;
    // An index that does not parse (or vanished) names nothing here: this is a report, not the collector.
    const names = new Set(await digestsOf(store, o.key).catch(() => []));
    for (const x of wanted) if (names.has(x)) bySnapshot[x]!.push(INDEX.exec(o.key)![1]!);
  });
  for (const list of Object.values(bySnapshot)) list.sort();
  return { bySnapshot, read: reading.length, indexes: indexes.length };
}

/** "; chunk <sha> is referenced by snapshots a, b (every recorded index read)" for an error message. */
export function describeReferences(r: ChunkReferences, listed = 20): string {
  const scope = r.read === r.indexes ? `every recorded index read (${r.read})` : `only ${r.read} of ${r.indexes} recorded indexes read`;
  return Object.entries(r.bySnapshot).map(([sha, ids]) =>
    `; chunk ${sha} is referenced by ${ids.length ? `snapshot${ids.length > 1 ? "s" : ""} ${ids.slice(0, listed).join(", ")}${ids.length > listed ? ` and ${ids.length - listed} more` : ""}` : "no recorded snapshot"}`,
  ).join("") + (Object.keys(r.bySnapshot).length ? ` (${scope})` : "");
}
