// Where the agent reads a snapshot's manifest from: the store, over a presigned GET (the Worker stays out of the
// byte path), with the SHA-256 the record keeps for it (the agent checks the bytes on arrival), and, for a layer
// manifest (an overlay delta's), its base's manifest beside it: the agent applies the one to the other.
import type { ManifestSource } from "../../container/contract/protocol.ts";
import type { Presigner } from "../store/presigner.ts";
import { manifestKey, type SnapshotRecord } from "./records.ts";

export async function manifestSource(presigner: Presigner, manifest: SnapshotRecord["manifest"]): Promise<ManifestSource> {
  const stored = { url: await presigner.url(manifest.key, "GET"), ...(manifest.sha256 ? { sha256: manifest.sha256 } : {}) };
  return manifest.layerOf ? { ...stored, base: { url: await presigner.url(manifestKey(manifest.layerOf), "GET") } } : stored;
}
