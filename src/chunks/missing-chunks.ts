// Which of an image's chunks the store lacks: one HEAD per distinct chunk, in parallel (bounded). A chunk whose size
// differs from the index's is treated as missing and uploaded again (its URL binds the SHA-256, so what lands is right).
import type { ObjectStore } from "../store/object-store.ts";
import { mapBounded } from "./bounded.ts";
import { chunkKey } from "./chunk-keys.ts";

const HEADS_IN_FLIGHT = 16;

export async function missingChunks(store: ObjectStore, chunks: { sha256: string; size: number }[]): Promise<{ sha256: string; size: number }[]> {
  const present = await mapBounded(chunks, HEADS_IN_FLIGHT, async (c) => (await store.head(chunkKey(c.sha256)))?.size === c.size);
  return chunks.filter((_, i) => !present[i]);
}
