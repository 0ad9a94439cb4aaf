// The archive phase of an overlay delta (a fork of a squashfs snapshot, opened with overlay-restore or
// lazy-overlay-restore). The overlay's upper directory is what changed, so the agent reads only it
// (container/mounts/overlay-layer.ts) for a layer manifest — the upper's entries, its whiteouts and opaque
// directories, the tree's totals — that a restore applies to the base's manifest. Neither the base manifest nor
// the base image is read, and the manifest goes from the sandbox to the store over a create-only presigned PUT bound
// to its SHA-256 (the store refuses other bytes); the record keeps that hash, and a restore checks it on arrival.
import type { Deps } from "../deps.ts";
import { SnapflowError } from "../errors.ts";
import { since } from "../phases/phase-runner.ts";
import { settled } from "../phases/settled.ts";
import type { AgentClient } from "../sandbox/agent-client.ts";
import { sandboxPaths } from "../sandbox/sandbox-paths.ts";
import { getJson, manifestKey, readSnapshot, restoreRecordKey } from "../snapshots/records.ts";
import { chainOver } from "../snapshots/overlay-chain.ts";
import { checkManifestBounds } from "./manifest-bounds.ts";
import { uploadExpirySeconds } from "./transfer/presigned-put.ts";
import type { ArchiveResult, BackupParams } from "./backup-params.ts";

/**
 * The layer manifest stored, the directory to archive (the upper itself, whiteouts included), and what the layer
 * holds, for the step's result.
 */
export async function storeOverlayLayer(d: Deps, p: BackupParams, agent: AgentClient): Promise<Required<Pick<ArchiveResult, "manifest" | "archiveRoot" | "chain">> & { layer: Record<string, number> }> {
  // A sleep waits for this step: what does not depend on each other is asked at once, and failures are answered in
  // the order the checks were made before (no overlay, no base, another parent, a chain too long).
  const [mounts, baseRead] = await Promise.allSettled([agent.mounts(), readSnapshot(d.store, d.kv, p.baseSnapshotId!)]);
  const overlay = settled(mounts).mounts.find((m) => m.kind === "overlay" && m.path === p.path);
  if (!overlay?.upper) throw new SnapflowError("bad_request", `no overlay is mounted at ${p.path} in sandbox ${p.sandboxId}; restore the base snapshot there with overlay-restore first`, { field: "path" });
  // The API took the base's record as it was (a squashfs image, or an overlay delta: the parent the workspace was
  // woken from); a base deleted since cannot be built on, and its chain is checked again.
  const base = settled(baseRead);
  if (!base) throw new SnapflowError("snapshot_unusable", `base snapshot ${p.baseSnapshotId} does not exist any more`);
  // The parent's totals are the whole tree's as it was woken (a delta's record keeps the tree's, not its layer's).
  const { files, dirs, symlinks, bytes } = base.manifest;
  const manifestOut = sandboxPaths.manifestOut(p.snapshotId);
  const key = manifestKey(p.snapshotId);
  const [woken, chained, taken, stored] = await Promise.allSettled([
    checkWokenFrom(d, p, overlay.source),
    chainOver(d, base, "baseSnapshotId"),
    agent.overlayLayer({ path: p.path, upper: overlay.upper, lower: overlay.source, base: base.id, baseTotals: { files, dirs, symlinks, bytes }, manifestOut }),
    // A retried step finds its own earlier upload (below).
    d.store.head(key),
  ]);
  settled(woken);
  const chain = settled(chained);
  const layer = settled(taken);

  checkManifestBounds(d.config, p, { bytes: layer.manifest.bytes, entries: layer.manifest.entries });
  const storeStarted = performance.now();
  // The URL binds the manifest's SHA-256 (parsed: exactly 64 hex, agent-answers.ts), can only create the object
  // and lives about as long as the upload needs: once the snapshot is recorded, nothing can rewrite its manifest
  // through it. A retried step finds its own earlier upload: kept when it is these bytes, else removed (nothing
  // refers to this snapshot's key before its record) and made again.
  // The store keeps the SHA-256 the upload was bound to (head's checksum): no need to read the object back.
  const earlier = settled(stored);
  if (earlier?.sha256 !== layer.manifest.sha256) {
    if (earlier) await d.store.delete(key);
    const url = await d.presigner.url(key, "PUT", { sha256: layer.manifest.sha256, createOnly: true, expiresSeconds: uploadExpirySeconds(layer.manifest.bytes) });
    const sent = await agent.uploadToUrl({ path: manifestOut, url, createOnly: true }, layer.manifest.bytes);
    if (sent.sha256 !== layer.manifest.sha256) throw new SnapflowError("transfer_damaged", `the layer manifest of ${p.snapshotId} changed between its hash and its upload`);
  }
  await agent.deleteFile(manifestOut).catch(() => {});
  const manifest = { ...layer.manifest.totals, manifestBytes: layer.manifest.bytes, ms: layer.ms, storeMs: since(storeStarted), sha256: layer.manifest.sha256, layerOf: base.id };
  const { entries, removed, opaque } = layer.manifest;
  return { manifest, archiveRoot: overlay.upper, chain, layer: { entries, removed, opaque, changedBytes: layer.changedBytes, depth: chain.length } };
}

/**
 * The overlay at the path was laid by a restore (its lower is that restore's mount, sandbox-layout.ts mountPath):
 * when the restore is recorded, it must have restored the snapshot this delta names as its parent, or the layer
 * would be recorded over a tree it was not taken on (its restore would then fail its verify). An overlay laid
 * otherwise (by hand, through POST /v1/overlay) is taken at the caller's word.
 */
async function checkWokenFrom(d: Deps, p: BackupParams, lower: string): Promise<void> {
  const restoreId = /^\/snapflow\/mnt\/(rs-\d{14}-[0-9a-f]{8})$/.exec(lower)?.[1];
  if (!restoreId) return;
  const restore = await getJson<{ snapshotId?: unknown }>(d.store, restoreRecordKey(restoreId));
  if (typeof restore?.snapshotId === "string" && restore.snapshotId !== p.baseSnapshotId) {
    throw new SnapflowError("bad_request", `baseSnapshotId: the overlay at ${p.path} was woken from ${restore.snapshotId} (restore ${restoreId}), not ${p.baseSnapshotId}; name the snapshot it was woken from`, { field: "baseSnapshotId" });
  }
}
