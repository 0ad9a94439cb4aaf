// The Worker's own hash of a stored object: verify must not take the sandbox's word for what the store holds
// (on the presigned paths the agent both uploads and would report the hash). The object streams through
// crypto.DigestStream in 256 KiB blocks (hash-stream.ts), so memory stays flat; CPU time grows with size, hence a
// ceiling above which the caller falls back to the store's own checksum (single PUTs) or the agent's read-back.
import { hashStream } from "./hash-stream.ts";
import type { ObjectStore } from "./object-store.ts";

/** Objects up to this size are hashed by the Worker itself in backup verify. */
export const WORKER_VERIFY_MAX_BYTES = 512 * 2 ** 20;

export async function storedSha256(store: ObjectStore, key: string): Promise<{ bytes: number; sha256: string } | null> {
  const o = await store.get(key);
  if (!o) return null;
  return hashStream(o.body);
}
