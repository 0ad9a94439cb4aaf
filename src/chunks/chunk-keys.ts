// Where chunks live in the store: chunks/<sha256 of the chunk's bytes>, shared by every snapshot that has them (a
// snapshot owns only its index, snapshots/<id>/archive.sqsh.index.json). Nothing but the collector deletes here.
import { SnapflowError } from "../errors.ts";

export const CHUNK_PREFIX = "chunks/";
const DIGEST = /^[0-9a-f]{64}$/;

/**
 * The key of the chunk whose SHA-256 is `sha256`. Only a digest makes a key: the digests come from a sandbox's
 * index (parsed against its schema first, agent-answers.ts), and a name such as `zz/../<another digest>` would
 * otherwise be signed as a key the sandbox chose (URL normalisation resolves the dot segments).
 */
export function chunkKey(sha256: string): string {
  if (!DIGEST.test(sha256)) throw new SnapflowError("unbound_write", `a chunk key needs a digest of 64 lowercase hex characters, got ${JSON.stringify(sha256.slice(0, 80))}`);
  return `${CHUNK_PREFIX}${sha256}`;
}

/** The digest a chunk key names, or null for a key that is not a chunk's. */
export function digestOfKey(key: string): string | null {
  const digest = key.slice(CHUNK_PREFIX.length);
  return key.startsWith(CHUNK_PREFIX) && DIGEST.test(digest) ? digest : null;
}
