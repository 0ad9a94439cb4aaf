// Where chunks live in the store: chunks/<sha256 of the chunk's bytes>, shared by every snapshot that has them (a
// snapshot owns only its index, snapshots/<id>/archive.sqsh.index.json). Nothing but the collector deletes here.
export const CHUNK_PREFIX = "chunks/";
export const chunkKey = (sha256: string) => `${CHUNK_PREFIX}${sha256}`;

/** The digest a chunk key names, or null for a key that is not a chunk's. */
export function digestOfKey(key: string): string | null {
  const digest = key.slice(CHUNK_PREFIX.length);
  return key.startsWith(CHUNK_PREFIX) && /^[0-9a-f]{64}$/.test(digest) ? digest : null;
}
