// Where the agent reads a snapshot's manifest from: the store, over a presigned GET (the Worker stays out of the
// byte path), with the SHA-256 the record keeps for it (the agent checks the bytes on arrival), and, for a layer
// manifest (an overlay delta's), its base's manifest beside it: the agent applies the one to the other. A delta in
// a chain (overlay-chain.ts) comes with the chain's image as its base and the layers between (`under`, oldest first).
import type { ManifestSource } from "../../container/contract/protocol.ts";
import type { Presigner } from "../store/presigner.ts";
import { manifestKey, type SnapshotRecord } from "./records.ts";

type StoredManifest = Pick<SnapshotRecord["manifest"], "key" | "sha256" | "layerOf">;

/**
 * `chain`: the manifests an overlay delta lays over, the image's first, ending with its parent's (a restore's
 * layers); without it, a layer's base is the snapshot its record names.
 */
export async function manifestSource(presigner: Presigner, manifest: StoredManifest, chain?: StoredManifest[]): Promise<ManifestSource> {
  const stored = async (m: StoredManifest) => ({ url: await presigner.url(m.key, "GET"), ...(m.sha256 ? { sha256: m.sha256 } : {}) });
  const top = await stored(manifest);
  if (!manifest.layerOf) return top;
  if (!chain?.length) return { ...top, base: await stored({ key: manifestKey(manifest.layerOf) }) };
  // The base is the last whole manifest of the chain: the image's, or an overlay delta's from before layers.
  const whole = chain.findLastIndex((m) => !m.layerOf);
  const under = chain.slice(whole + 1);
  return { ...top, base: await stored(chain[Math.max(whole, 0)]!), ...(under.length ? { under: await Promise.all(under.map(stored)) } : {}) };
}
