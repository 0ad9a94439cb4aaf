// A backup that reads the source once: the agent walks the tree (metadata only), tar archives what the walk names,
// and the agent makes the manifest from the tar stream on its way to the compressor (container/archive/archive.ts). The
// manifest and the result land in staging files; the Worker moves the manifest to the store once the archive is
// complete. A delta hands the agent its base manifest (a presigned GET): unchanged files keep the base's hashes
// and are not read, changes are found by metadata as restic and git's index do.
import type { Deps } from "../deps.ts";
import { SnapflowError } from "../errors.ts";
import type { AgentClient, SinglePassResult } from "../sandbox/agent-client.ts";
import { sandboxPaths } from "../sandbox/sandbox-paths.ts";
import { deletedKey, manifestKey } from "../snapshots/records.ts";
import type { BackupStrategy } from "../strategies/registry.ts";
import type { ArchiveResult, BackupParams } from "./backup-params.ts";
import { checkManifestBounds } from "./manifest-bounds.ts";



/** Where the agent reads a delta's base manifest from: the store, over a presigned GET. */
export async function baseManifestSource(d: Deps, p: BackupParams): Promise<{ url: string } | undefined> {
  if (!p.baseSnapshotId) return undefined;
  const key = manifestKey(p.baseSnapshotId);
  if (!(await d.store.head(key))) throw new SnapflowError("snapshot_unusable", `base snapshot ${p.baseSnapshotId}'s manifest is missing from the store`);
  return { url: await d.presigner.url(key, "GET") };
}

/** A streamed archive's single-pass query fields: where the manifest and result go, and a delta's base manifest. */
export async function singlePassQuery(d: Deps, p: BackupParams) {
  const base = await baseManifestSource(d, p);
  return { manifestOut: sandboxPaths.manifestOut(p.snapshotId), resultOut: sandboxPaths.resultOut(p.snapshotId), ...(base ? { baseUrl: base.url } : {}) };
}

/**
 * After the archive: the manifest file to the store (and a delta's deletions beside it), the staging files gone.
 * Idempotent, so a retried step can run it again.
 */
export async function storeSinglePassManifest(d: Deps, p: BackupParams, agent: AgentClient, result: SinglePassResult): Promise<Pick<ArchiveResult, "manifest" | "delta">> {
  const t = performance.now();
  const file = sandboxPaths.manifestOut(p.snapshotId);
  // Measured before a byte is stored: the length the store will enforce, and the entries the agent counted.
  checkManifestBounds(d.config, p, { bytes: result.manifest.jsonBytes, entries: result.manifest.entries });
  const r = await agent.readFile(file);
  const length = Number(r.headers.get("content-length"));
  if (!Number.isSafeInteger(length) || length !== result.manifest.jsonBytes) {
    await r.body?.cancel();
    throw new SnapflowError("transfer_damaged", `the manifest file ${file} is ${r.headers.get("content-length")} bytes; the archiver reported ${result.manifest.jsonBytes}`);
  }
  await d.store.put(manifestKey(p.snapshotId), r.body!, { length, contentType: "application/json" });
  if (result.delta) await d.store.put(deletedKey(p.snapshotId), JSON.stringify(result.delta.deleted), { contentType: "application/json" });
  await agent.deleteFile(file).catch(() => {});
  await agent.deleteFile(sandboxPaths.resultOut(p.snapshotId)).catch(() => {});
  const manifest = { ...result.manifest.totals, manifestBytes: result.manifest.jsonBytes, ms: result.manifest.walkMs, storeMs: Math.round(performance.now() - t) };
  const delta = result.delta ? { list: "", changed: result.delta.changed, deleted: result.delta.deleted.length, changedBytes: result.delta.changedBytes } : undefined;
  return { manifest, ...(delta ? { delta } : {}) };
}
