// Which of an image's chunks the store lacks, or holds wrong, under the backing-up tenant's prefix (chunk-keys.ts:
// another tenant's chunks are never looked at, so the answer says nothing about what other tenants hold): one HEAD
// per distinct chunk, in parallel (bounded).
// Dedup reuses a chunk only if its object is the chunk its name says, because every later backup with that content
// would otherwise be recorded good over it and only a restore elsewhere would find out (the source sandbox's warm
// cache hides it). So a chunk is reused when
//   - its size is the index's, and
//   - the SHA-256 the store keeps for it (ObjectInfo.sha256: R2's checksums.sha256, S3's x-amz-checksum-sha256 in
//     checksum mode) is its name; every chunk PUT is bound to that checksum (chunked.ts), so a store that keeps
//     checksums reports one for every chunk our uploads wrote, or
//   - the store reports none (an object written otherwise, or a store that keeps none) and the Worker hashed the
//     stored bytes itself and got its name: at most `rehashBytes` of such chunks per lookup, picked at random, so
//     that repeated backups cover them all; the ones beyond are reused on their size alone and counted (`unverified`).
// Any other chunk is uploaded again: the chunk PUT is not create-only, so the right bytes (bound to the name's
// SHA-256) replace the wrong ones. Those found present but wrong are counted (`bad`) for the step result.
import type { ObjectStore } from "../store/object-store.ts";
import { storedSha256 } from "../store/stored-sha256.ts";
import { mapBounded } from "./bounded.ts";
import { chunkKey } from "./chunk-keys.ts";

const HEADS_IN_FLIGHT = 16;
const GETS_IN_FLIGHT = 8;

/**
 * Stored bytes a backup's lookup hashes itself when the store reports no checksum: ~0.2 s of the Worker's CPU and
 * a few seconds of reading from a nearby store, against a step budget of minutes; a store that reports checksums
 * for every chunk (SeaweedFS does) never uses it.
 */
export const REHASH_MAX_BYTES = 64 * 2 ** 20;

export interface Chunk {
  sha256: string;
  size: number;
}

export interface ChunkLookup {
  /** to upload: absent, of another size, or holding other bytes than the name says */
  missing: Chunk[];
  /** among `missing`: present, but the store's checksum or the Worker's hash is not the name */
  bad: string[];
  /** reused: the store's checksum is the name */
  verified: number;
  /** the store reported no checksum and the Worker hashed the stored bytes (reused if they were the name, else bad) */
  rehashed: number;
  /** reused on size alone: the store reported no checksum and the hashing budget was spent */
  unverified: number;
}

type Seen = "absent" | "bad" | "verified" | "unchecked" | "rehashed";

export async function missingChunks(store: ObjectStore, tenant: string, chunks: Chunk[], options: { rehashBytes?: number } = {}): Promise<ChunkLookup> {
  const seen = await mapBounded(chunks, HEADS_IN_FLIGHT, async (c): Promise<Seen> => {
    const head = await store.head(chunkKey(tenant, c.sha256));
    if (!head || head.size !== c.size) return "absent";
    if (head.sha256 === undefined) return "unchecked";
    return head.sha256 === c.sha256 ? "verified" : "bad";
  });

  // The store's word is missing for these: hash a random sample within the budget.
  const unchecked = chunks.flatMap((_, i) => (seen[i] === "unchecked" ? [i] : []));
  const order = unchecked.map((i) => ({ i, r: crypto.getRandomValues(new Uint32Array(1))[0]! })).sort((a, b) => a.r - b.r).map((x) => x.i);
  const sample: number[] = [];
  let budget = options.rehashBytes ?? 0;
  for (const i of order) {
    if (chunks[i]!.size > budget) continue;
    budget -= chunks[i]!.size;
    sample.push(i);
  }
  await mapBounded(sample, GETS_IN_FLIGHT, async (i) => {
    const c = chunks[i]!;
    const stored = await storedSha256(store, chunkKey(tenant, c.sha256));
    seen[i] = !stored || stored.bytes !== c.size ? "absent" : stored.sha256 === c.sha256 ? "rehashed" : "bad";
  });

  const count = (s: Seen) => seen.filter((x) => x === s).length;
  return {
    missing: chunks.filter((_, i) => seen[i] === "absent" || seen[i] === "bad"),
    bad: chunks.filter((_, i) => seen[i] === "bad").map((c) => c.sha256),
    verified: count("verified"),
    rehashed: sample.length,
    unverified: count("unchecked"),
  };
}
