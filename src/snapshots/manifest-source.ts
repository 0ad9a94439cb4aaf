// Where the agent reads a snapshot's manifest from: the store, over a presigned GET (the Worker stays out of the
// byte path), with the SHA-256 the record keeps for it (the agent checks the bytes on arrival), and, for a layer
// manifest (an overlay delta's), its base's manifest beside it: the agent applies the one to the other. A delta in
// a chain (overlay-chain.ts) comes with the chain's image as its base and the layers between (`under`, oldest first).
// A file-level snapshot's manifest is not stored: the agent has the engine make it from the index (`fromIndex`).
import type { IndexManifest, ManifestSource } from "../../container/contract/protocol.ts";
import { SnapflowError } from "../errors.ts";
import type { Presigner } from "../store/presigner.ts";
import { signedChain } from "./index-chain.ts";
import { manifestKey, type ManifestFromIndex, type SnapshotRecord } from "./records.ts";

export type StoredManifest = Pick<SnapshotRecord["manifest"], "key" | "sha256" | "layerOf" | "fromIndex">;

/** The source of a manifest made from a file-level snapshot's index; `sha256`: the manifest's, as its record keeps it. */
async function fromIndex(presigner: Presigner, index: ManifestFromIndex, sha256: string | undefined): Promise<IndexManifest> {
  if (!sha256) throw new SnapflowError("snapshot_unusable", `the manifest made from index ${index.key} has no SHA-256 in its record to check it against`);
  return { index: { url: await presigner.url(index.key, "GET"), sha256: index.sha256, ...(await signedChain(presigner, index.chain)) }, sha256, ...(index.selection ? { selection: index.selection } : {}) };
}

/**
 * `chain`: the manifests an overlay delta lays over, the image's first, ending with its parent's (a restore's
 * layers); without it, a layer's base is the snapshot its record names.
 */
export async function manifestSource(presigner: Presigner, manifest: StoredManifest, chain?: StoredManifest[]): Promise<ManifestSource> {
  const stored = async (m: StoredManifest) => ({ url: await presigner.url(m.key, "GET"), ...(m.sha256 ? { sha256: m.sha256 } : {}) });
  const whole = (m: StoredManifest) => (m.fromIndex ? fromIndex(presigner, m.fromIndex, m.sha256) : stored(m));
  if (!manifest.layerOf) return whole(manifest);
  const top = await stored(manifest);
  if (!chain?.length) return { ...top, base: await stored({ key: manifestKey(manifest.layerOf) }) };
  // The base is the last whole manifest of the chain: the image's (or a file-level snapshot's), or an overlay delta's
  // from before layers.
  const last = chain.findLastIndex((m) => !m.layerOf);
  const under = chain.slice(last + 1);
  return { ...top, base: await whole(chain[Math.max(last, 0)]!), ...(under.length ? { under: await Promise.all(under.map(stored)) } : {}) };
}
