// The archive phase of an overlay delta (a fork of a squashfs snapshot, opened with overlay-restore or
// lazy-overlay-restore). The overlay's upper directory is what changed, so the agent reads only it
// (container/overlay-layer.ts) for a layer manifest — the upper's entries, its whiteouts and opaque
// directories, the tree's totals — that a restore applies to the base's manifest. Neither the base manifest nor
// the base image is read, and the manifest goes from the sandbox to the store over a presigned PUT bound to its
// SHA-256 (the store refuses other bytes); the record keeps that hash, and a restore checks it on arrival.
import type { Deps } from "../deps.ts";
import { SnapflowError } from "../errors.ts";
import { since } from "../phases/phase-runner.ts";
import type { AgentClient } from "../sandbox/agent-client.ts";
import { sandboxPaths } from "../sandbox/sandbox-paths.ts";
import { manifestKey, readSnapshot } from "../snapshots/records.ts";
import type { ArchiveResult, BackupParams } from "./backup-params.ts";

/**
 * The layer manifest stored, the directory to archive (the upper itself, whiteouts included), and what the layer
 * holds, for the step's result.
 */
export async function storeOverlayLayer(d: Deps, p: BackupParams, agent: AgentClient): Promise<Required<Pick<ArchiveResult, "manifest" | "archiveRoot">> & { layer: Record<string, number> }> {
  const overlay = (await agent.mounts()).mounts.find((m) => m.kind === "overlay" && m.path === p.path);
  if (!overlay?.upper) throw new SnapflowError("bad_request", `no overlay is mounted at ${p.path} in sandbox ${p.sandboxId}; restore the base snapshot there with overlay-restore first`, { field: "path" });
  // The API took the base's record as it was (a squashfs image); a base deleted since cannot be built on.
  const base = await readSnapshot(d.store, d.kv, p.baseSnapshotId!);
  if (!base) throw new SnapflowError("snapshot_unusable", `base snapshot ${p.baseSnapshotId} does not exist any more`);
  const { files, dirs, symlinks, bytes } = base.manifest;
  const manifestOut = sandboxPaths.manifestOut(p.snapshotId);
  const layer = await agent.overlayLayer({ path: p.path, upper: overlay.upper, lower: overlay.source, base: base.id, baseTotals: { files, dirs, symlinks, bytes }, manifestOut });

  const storeStarted = performance.now();
  // Not create-only: a retried step writes this backup's own key again, and the record keeps the last hash.
  const url = await d.presigner.url(manifestKey(p.snapshotId), "PUT", { sha256: layer.manifest.sha256 });
  const sent = await agent.uploadToUrl({ path: manifestOut, url }, layer.manifest.bytes);
  if (sent.sha256 !== layer.manifest.sha256) throw new SnapflowError("transfer_damaged", `the layer manifest of ${p.snapshotId} changed between its hash and its upload`);
  await agent.deleteFile(manifestOut).catch(() => {});
  const manifest = { ...layer.manifest.totals, manifestBytes: layer.manifest.bytes, ms: layer.ms, storeMs: since(storeStarted), sha256: layer.manifest.sha256, layerOf: base.id };
  const { entries, removed, opaque } = layer.manifest;
  return { manifest, archiveRoot: overlay.upper, layer: { entries, removed, opaque, changedBytes: layer.changedBytes } };
}
