// Which chunks of a chunked squashfs image a lazy mount needs before its tree answers: the backup lists them in the
// snapshot record (ChunkRecord.mountFirst), and a restore signs their URLs first, the rest once the tree is usable.
import type { ChunkIndex } from "../../container/contract/protocol.ts";
import { distinctChunks } from "./chunk-index.ts";

/** A record lists at most this many (an image whose tables are larger is found through its index at restore). */
export const MOUNT_FIRST_MAX = 512;

/**
 * The chunks whose URLs the mount needs before it answers — the image's first `headChunks` (the first holds the superblock) and its
 * tables, which the mount and the metadata walk read: where the index says they lie (`tables`, from the superblock,
 * for indexes made since it was recorded), else its last `tailBytes`, where mksquashfs writes them (the default 128
 * MiB holds them for about a million entries) — and the rest, signed after the tree is usable (deliverRemainingUrls):
 * the time to usable then no longer grows with the image's chunk count. Only those few chunks are fetched while the
 * tree is being mounted, so the prefetch of the rest does not compete with the mount for the sandbox's CPU. A read that
 * needs a chunk of the rest before its URL came waits for it (the helper's urlfile.Await), bounded by the agent's
 * store deadline.
 */
export function splitForMount(index: ChunkIndex, o: { headChunks: number; tailBytes: number }): { first: string[]; rest: string[] } {
  const [from, to] = index.tables ? [index.tables.from, index.tables.to] : [index.size - o.tailBytes, index.size];
  const first = new Set<string>();
  for (const [i, ch] of index.chunks.entries()) if (i < o.headChunks || (ch.offset + ch.size > from && ch.offset < to)) first.add(ch.sha256);
  return { first: [...first], rest: distinctChunks(index).map((ch) => ch.sha256).filter((sha) => !first.has(sha)) };
}

/** What a backup records as its image's mount set, or nothing when it is larger than a record should carry. */
export function mountFirstOf(index: ChunkIndex, o: { headChunks: number; tailBytes: number }): string[] | undefined {
  const { first } = splitForMount(index, o);
  return first.length <= MOUNT_FIRST_MAX ? first : undefined;
}
