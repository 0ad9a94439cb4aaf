// A layered file-level index's chain as a reader in the sandbox gets it (native/lazy/internal/filecas/layer.go): each
// object beneath the snapshot's own index, whole index first, as a presigned GET and the SHA-256 its record keeps.
// The keys are the record's, which the Worker wrote from the tenant and a snapshot id (chunks/pack-keys.ts indexKey).
import type { Presigner } from "../store/presigner.ts";
import type { IndexObject } from "./records.ts";

/** `{ chain }` signed, or nothing for a whole index. */
export async function signedChain(presigner: Presigner, chain: IndexObject[] | undefined): Promise<{ chain?: { url: string; sha256: string }[] }> {
  if (!chain?.length) return {};
  return { chain: await Promise.all(chain.map(async (o) => ({ url: await presigner.url(o.key, "GET"), sha256: o.sha256 }))) };
}
