// Tar deltas store a layer manifest (version 2: what changed, and the deletions) over their base's manifest, and
// the base may itself be a tar delta whose manifest is a layer: reading a delta's tree manifest means following the
// chain of `manifest.layerOf` down to a whole manifest. Each record names only its base, so the chain is read link
// by link; a backup stores a whole manifest again before the chain passes MAX_LAYER_CHAIN (single-pass.ts), so a
// reader never follows more than that many.
import { MAX_OVERLAY_CHAIN } from "../../container/contract/protocol.ts";
import { SnapflowError } from "../errors.ts";
import type { ObjectStore } from "../store/object-store.ts";
import type { Presigner } from "../store/presigner.ts";
import { manifestSource, type StoredManifest } from "./manifest-source.ts";
import { readSnapshot, type SnapshotRecord } from "./records.ts";
import { tenantOf } from "./tenant.ts";

/** The agent applies at most this many layers over a whole manifest (ManifestSource's `under`, and the top one). */
export const MAX_LAYER_CHAIN = MAX_OVERLAY_CHAIN;

const stored = (m: SnapshotRecord["manifest"]): StoredManifest => ({ key: m.key, ...(m.sha256 ? { sha256: m.sha256 } : {}), ...(m.layerOf ? { layerOf: m.layerOf } : {}), ...(m.fromIndex ? { fromIndex: m.fromIndex } : {}) });

/**
 * The manifests a tar delta's layer lies over, the whole one first, ending with its base's: empty for a whole
 * manifest. A broken chain (a link gone, another tenant's) is snapshot_unusable.
 */
export async function layerChain(d: { store: ObjectStore; kv: KVNamespace }, record: SnapshotRecord): Promise<StoredManifest[]> {
  const chain: StoredManifest[] = [];
  for (let at = record; at.manifest.layerOf; ) {
    if (chain.length >= MAX_LAYER_CHAIN) throw new SnapflowError("snapshot_unusable", `snapshot ${record.id}'s manifest lies over more than ${MAX_LAYER_CHAIN} layers`);
    const below = await readSnapshot(d.store, d.kv, at.manifest.layerOf);
    if (!below) throw new SnapflowError("snapshot_unusable", `snapshot ${at.id}'s manifest is a layer over ${at.manifest.layerOf}, which does not exist any more`);
    if (tenantOf(below) !== tenantOf(record)) throw new SnapflowError("snapshot_unusable", `snapshot ${at.id}'s manifest is a layer over ${below.id}, another tenant's snapshot`);
    chain.unshift(stored(below.manifest));
    at = below;
  }
  return chain;
}

/** Where the agent reads a snapshot's tree manifest: its own, and for a tar delta's layer, the chain below it. */
export async function treeManifestSource(d: { store: ObjectStore; kv: KVNamespace; presigner: Presigner }, record: SnapshotRecord) {
  const chain = record.delta?.kind === "overlay-upper" ? undefined : await layerChain(d, record);
  return { source: await manifestSource(d.presigner, record.manifest, chain?.length ? chain : undefined), depth: chain?.length ?? 0 };
}
