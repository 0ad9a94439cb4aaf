// Which chunks' URLs a lazy mount starts with (src/chunks/mount-set.ts splitForMount): the head and the
// squashfs tables where the index names them, else the image's tail; every distinct chunk exactly once overall.
import { describe, expect, it } from "vitest";
import type { ChunkIndex } from "../../container/contract/protocol.ts";
import { MOUNT_FIRST_MAX, mountFirstOf, splitForMount } from "../../src/chunks/mount-set.ts";

const digest = (i: number) => i.toString(16).padStart(64, "0");
/** Ten 100-byte chunks; chunk 7 has the same bytes as chunk 2 (a duplicate). */
function index(tables?: { from: number; to: number }): ChunkIndex {
  const chunks = Array.from({ length: 10 }, (_, i) => ({ sha256: digest(i === 7 ? 2 : i), offset: i * 100, size: 100 }));
  return { version: 1, size: 1000, sha256: digest(99), avgChunk: 100, chunks, ...(tables ? { tables } : {}) };
}

describe("splitForMount", () => {
  it("takes the head and the chunks the tables overlap, where the index names them", () => {
    const { first, rest } = splitForMount(index({ from: 550, to: 801 }), { headChunks: 1, tailBytes: 1000 });
    expect(first.sort()).toEqual([0, 2, 5, 6, 8].map(digest).sort()); // 7 is 2's bytes
    expect(rest.sort()).toEqual([1, 3, 4, 9].map(digest).sort());
  });

  it("without tables in the index, takes the last tailBytes", () => {
    const { first, rest } = splitForMount(index(), { headChunks: 1, tailBytes: 250 });
    expect(first.sort()).toEqual([0, 2, 8, 9].map(digest).sort()); // chunk 7 is named by 2's digest
    expect(new Set([...first, ...rest]).size).toBe(first.length + rest.length);
    expect(rest).not.toContain(digest(2)); // the duplicate of 7 came first
  });

  it("a backup records the mount set only while it is small", () => {
    expect(mountFirstOf(index({ from: 550, to: 801 }), { headChunks: 1, tailBytes: 0 })?.sort()).toEqual([0, 2, 5, 6, 8].map(digest).sort());
    expect(mountFirstOf(index(), { headChunks: 10, tailBytes: 0 })).toHaveLength(9); // 10 chunks, 9 distinct
    const chunks = Array.from({ length: MOUNT_FIRST_MAX + 1 }, (_, i) => ({ sha256: digest(i), offset: i * 100, size: 100 }));
    const big: ChunkIndex = { version: 1, size: chunks.length * 100, sha256: digest(99), avgChunk: 100, chunks };
    expect(mountFirstOf(big, { headChunks: MOUNT_FIRST_MAX, tailBytes: 0 })).toHaveLength(MOUNT_FIRST_MAX);
    expect(mountFirstOf(big, { headChunks: MOUNT_FIRST_MAX + 1, tailBytes: 0 })).toBeUndefined();
  });
});
