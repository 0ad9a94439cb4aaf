// A chunked snapshot's index (container/contract/protocol.ts ChunkIndex: the ordered chunks of the image with offsets and
// sizes, and the image's SHA-256) as the Worker stores and reads it. The stored bytes are this module's
// serialisation, and their SHA-256 is the snapshot record's archive.sha256: the index is checked like an archive
// wherever it travels, and the index in turn names the hash of every chunk.
import { ChunkIndex } from "../../container/contract/protocol.ts";
import { SnapflowError } from "../errors.ts";
import { toHex } from "../store/hash-stream.ts";
import type { ObjectStore } from "../store/object-store.ts";

export interface IndexBytes {
  text: string;
  bytes: number;
  sha256: string;
}

/** The index's stored form: compact JSON, hashed. */
export async function serializeIndex(index: ChunkIndex): Promise<IndexBytes> {
  const text = JSON.stringify(index);
  const data = new TextEncoder().encode(text);
  return { text, bytes: data.byteLength, sha256: toHex(await crypto.subtle.digest("SHA-256", data)) };
}

/** Each distinct chunk once (an image may repeat one: zeros, identical files), with its size, in first-use order. */
export function distinctChunks(index: ChunkIndex): { sha256: string; size: number }[] {
  const seen = new Map<string, number>();
  for (const c of index.chunks) if (!seen.has(c.sha256)) seen.set(c.sha256, c.size);
  return [...seen].map(([sha256, size]) => ({ sha256, size }));
}

/**
 * Reads a stored index and checks it is the one the record names (its SHA-256) and that it parses. `recorded`: the
 * hash is a snapshot record's, and a record is written only after its backup's verify read these bytes back through
 * the schema (chunked.ts verifyStored); the same bytes are not checked again (the schema takes 5–40 ms at 8,686
 * chunks, on a restore's way to usable).
 */
export async function readIndex(store: ObjectStore, key: string, expectedSha256?: string, opts: { recorded?: boolean } = {}): Promise<ChunkIndex> {
  const o = await store.get(key);
  if (!o) throw new SnapflowError("snapshot_unusable", `chunk index ${key} is missing from the store`);
  const data = new Uint8Array(await new Response(o.body).arrayBuffer());
  if (expectedSha256) {
    const got = toHex(await crypto.subtle.digest("SHA-256", data));
    if (got !== expectedSha256) throw new SnapflowError("snapshot_unusable", `chunk index ${key} has sha256 ${got}, the snapshot record says ${expectedSha256}`);
  }
  const json: unknown = JSON.parse(new TextDecoder().decode(data));
  if (opts.recorded && expectedSha256) return json as ChunkIndex;
  const parsed = ChunkIndex.safeParse(json);
  if (!parsed.success) throw new SnapflowError("snapshot_unusable", `chunk index ${key} does not parse: ${parsed.error.issues[0]!.path.join(".")}: ${parsed.error.issues[0]!.message}`);
  return parsed.data;
}
