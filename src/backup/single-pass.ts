// A backup that reads the source once: the agent walks the tree (metadata only), tar archives what the walk names,
// and the agent makes the manifest from the tar stream on its way to the compressor (container/archive/archive.ts). The
// manifest and the result land in staging files; the Worker moves the manifest to the store once the archive is
// complete. A delta hands the agent its base manifest (a presigned GET): unchanged files keep the base's hashes
// and are not read, changes are found by metadata as restic and git's index do.
import type { Deps } from "../deps.ts";
import { SnapflowError } from "../errors.ts";
import type { AgentClient, SinglePassResult } from "../sandbox/agent-client.ts";
import { sandboxPaths } from "../sandbox/sandbox-paths.ts";
import { deletedKey, manifestKey, readSnapshot } from "../snapshots/records.ts";
import { MAX_LAYER_CHAIN, treeManifestSource } from "../snapshots/layer-chain.ts";
import type { ManifestSource } from "../../container/contract/protocol.ts";
import type { BackupStrategy } from "../strategies/registry.ts";
import type { ArchiveResult, BackupParams } from "./backup-params.ts";
import { checkManifestBounds } from "./manifest-bounds.ts";



/**
 * Where the agent reads a delta's base manifest from: the store, over presigned GETs (a base that is itself a tar
 * delta comes with the layers below it: layer-chain.ts). `layerOver`: the delta's manifest is stored as a layer
 * over the base, unless the chain would grow past what a reader applies (then a whole manifest starts it afresh).
 */
export async function baseManifestSource(d: Deps, p: BackupParams): Promise<{ source: ManifestSource; layerOver?: string; baseKept?: { id: string; sha256: string }; totals: { files: number; dirs: number; symlinks: number; bytes: number } } | undefined> {
  if (!p.baseSnapshotId) return undefined;
  const base = await readSnapshot(d.store, d.kv, p.baseSnapshotId);
  if (!base) throw new SnapflowError("snapshot_unusable", `base snapshot ${p.baseSnapshotId} does not exist any more`);
  if (!base.manifest.fromIndex && !(await d.store.head(base.manifest.key))) throw new SnapflowError("snapshot_unusable", `base snapshot ${p.baseSnapshotId}'s manifest is missing from the store`);
  const { source, depth } = await treeManifestSource(d, base);
  // The sandbox may keep the base's whole-tree manifest (container/manifest/manifest-kept.ts): it is used when its
  // SHA-256 is the one the base's record keeps for it (a layer's record keeps the tree's beside its own).
  const treeSha256 = base.manifest.layerOf ? base.manifest.treeSha256 : base.manifest.sha256;
  const { files, dirs, symlinks, bytes } = base.manifest;
  return { source, ...(depth < MAX_LAYER_CHAIN ? { layerOver: base.id } : {}), ...(treeSha256 ? { baseKept: { id: base.id, sha256: treeSha256 } } : {}), totals: { files, dirs, symlinks, bytes } };
}

/** A streamed archive's single-pass query fields: where the manifest and result go, and a delta's base manifest. */
export async function singlePassQuery(d: Deps, p: BackupParams) {
  const base = await baseManifestSource(d, p);
  return {
    manifestOut: sandboxPaths.manifestOut(p.snapshotId), resultOut: sandboxPaths.resultOut(p.snapshotId), keepAs: p.snapshotId,
    ...(base ? { baseSource: JSON.stringify(base.source), ...(base.layerOver ? { layerOver: base.layerOver } : {}), ...(base.baseKept ? { baseKept: JSON.stringify(base.baseKept) } : {}) } : {}),
  };
}

/**
 * After the archive: the manifest file to the store (and a delta's deletions beside it), the staging files gone.
 * Idempotent, so a retried step can run it again.
 */
export async function storeSinglePassManifest(d: Deps, p: BackupParams, agent: AgentClient, result: SinglePassResult, how: { bySandbox?: boolean } = {}): Promise<Pick<ArchiveResult, "manifest" | "delta">> {
  const t = performance.now();
  const file = sandboxPaths.manifestOut(p.snapshotId);
  // Measured before a byte is stored: the length the store will enforce, and the entries the agent counted.
  checkManifestBounds(d.config, p, { bytes: result.manifest.jsonBytes, entries: result.manifest.entries });
  // Bound to the SHA-256 the agent reported (the store refuses other bytes): the record keeps it, and every reader
  // checks the manifest against it on arrival.
  const { sha256, layerOf, treeSha256 } = result.manifest;
  const storeManifest = async () => {
    if (how.bySandbox && sha256) return manifestBySandbox(d, p, agent, file, result.manifest.jsonBytes, sha256);
    const r = await agent.readFile(file);
    const length = Number(r.headers.get("content-length"));
    if (!Number.isSafeInteger(length) || length !== result.manifest.jsonBytes) {
      await r.body?.cancel();
      throw new SnapflowError("transfer_damaged", `the manifest file ${file} is ${r.headers.get("content-length")} bytes; the archiver reported ${result.manifest.jsonBytes}`);
    }
    await d.store.put(manifestKey(p.snapshotId), r.body!, { length, contentType: "application/json", ...(sha256 ? { sha256 } : {}) });
  };
  // Independent requests, made together: a small delta's whole transfer is a few round trips, and these were four.
  await Promise.all([
    storeManifest(),
    result.delta && d.store.put(deletedKey(p.snapshotId), JSON.stringify(result.delta.deleted), { contentType: "application/json" }),
  ]);
  await Promise.all([file, sandboxPaths.resultOut(p.snapshotId)].map((f) => agent.deleteFile(f).catch(() => {})));
  if (layerOf !== undefined && layerOf !== p.baseSnapshotId) throw new SnapflowError("transfer_damaged", `the agent wrote a layer manifest over ${layerOf}; this delta's base is ${p.baseSnapshotId}`);
  const manifest = { ...result.manifest.totals, manifestBytes: result.manifest.jsonBytes, ms: result.manifest.walkMs, storeMs: Math.round(performance.now() - t), ...(sha256 ? { sha256 } : {}), ...(layerOf ? { layerOf, ...(treeSha256 ? { treeSha256 } : {}) } : {}) };
  const delta = result.delta ? { list: "", changed: result.delta.changed, deleted: result.delta.deleted.length, changedBytes: result.delta.changedBytes, ...(result.delta.baseFrom ? { baseFrom: result.delta.baseFrom } : {}) } : undefined;
  return { manifest, ...(delta ? { delta } : {}) };
}

/**
 * The manifest PUT by the sandbox to a presigned URL bound to its SHA-256 (the store refuses other bytes), so that it
 * does not pass through the Worker either (the default backup's path: ~10 MB for 31.7k entries, most of what was left
 * of that backup's Worker CPU). A URL cannot bind the length, so a HEAD checks it against what the bounds allowed.
 */
async function manifestBySandbox(d: Deps, p: BackupParams, agent: AgentClient, file: string, bytes: number, sha256: string): Promise<void> {
  const key = manifestKey(p.snapshotId);
  const url = await d.presigner.url(key, "PUT", { sha256, expiresSeconds: 60 + Math.ceil(bytes / 8e6) });
  const sent = await agent.uploadToUrl({ path: file, url }, bytes);
  const stored = await d.store.head(key);
  if (sent.sha256 !== sha256 || stored?.size !== bytes) {
    await d.store.delete([key]);
    throw new SnapflowError("transfer_damaged", `the manifest file ${file} the sandbox uploaded is ${stored?.size ?? "not"} stored bytes (sha256 ${sent.sha256}); the archiver reported ${bytes} bytes, sha256 ${sha256}`);
  }
}
