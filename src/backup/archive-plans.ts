// The archive phase's plans, chosen once per strategy as a restore chooses its plan (restore-plan.ts):
//
//   single-pass     a tar archive and its manifest from one read of the tree (a delta too: single-pass.ts)
//   image           an image and its manifest made by the agent, the manifest then moved to the store
//   overlay-upper   an overlay delta: the upper directory is archived, its layer manifest stored (overlay-layer.ts)
//   changed-files   a tar delta on a path without single pass: the agent plans it against the base's manifest
//   walk            everything else: the manifest is a walk of its own, then the archive (a second read)
//
// Each plan works on one context (the run's deps, params, strategy, agent and start) rather than a parameter list.
// Streaming transfer paths archive during transfer: their plans only take the manifest (or nothing, single pass).
import type { Deps } from "../deps.ts";
import { SnapflowError } from "../errors.ts";
import { since } from "../phases/phase-runner.ts";
import { AgentCallError, type AgentClient } from "../sandbox/agent-client.ts";
import { sandboxPaths } from "../sandbox/sandbox-paths.ts";
import { deletedKey, manifestKey } from "../snapshots/records.ts";
import { isImage, type BackupStrategy } from "../strategies/registry.ts";
import type { ImageFormat, TarFormat } from "../../container/contract/protocol.ts";
import type { ArchiveResult, BackupParams, ManifestTotals } from "./backup-params.ts";
import { checkManifestBounds, readManifestBounded } from "./manifest-bounds.ts";
import { storeOverlayLayer } from "./overlay-layer.ts";
import { baseManifestSource, storeSinglePassManifest } from "./single-pass.ts";
import { BACKUP_TRANSFERS } from "./transfer/index.ts";

export interface ArchiveContext {
  d: Deps;
  p: BackupParams;
  s: BackupStrategy;
  agent: AgentClient;
  /** the phase's start (performance.now()), for its ms */
  started: number;
}

export type ArchivePlanName = "single-pass" | "image" | "overlay-upper" | "changed-files" | "walk";

/** Tar archives of a tree are made in one pass; images and overlay uppers still take the manifest apart. */
export const isSinglePass = (s: BackupStrategy) => (s.format.kind === "tar" || s.format.kind === "files") && s.delta !== "overlay-upper" && BACKUP_TRANSFERS[s.path].singlePass;

export function archivePlanOf(s: BackupStrategy): ArchivePlanName {
  if (isSinglePass(s)) return "single-pass";
  // An image the transfer makes elsewhere (the SDK's backup) takes only the manifest here, as a streaming path does.
  if (isImage(s.format) && !s.delta && !BACKUP_TRANSFERS[s.path].streamsArchive) return "image";
  if (s.delta === "overlay-upper") return "overlay-upper";
  return s.delta ? "changed-files" : "walk";
}

export const ARCHIVE_PLANS: Record<ArchivePlanName, (c: ArchiveContext) => Promise<ArchiveResult>> = {
  "single-pass": singlePassPlan,
  image: imagePlan,
  "overlay-upper": async (c) => {
    // The merged view is what a restore must reproduce; the upper directory is what changed, so only it is read.
    const { manifest, archiveRoot, chain, layer } = await storeOverlayLayer(c.d, c.p, c.agent);
    return { ...(await archiveTail(c, { manifest, archiveRoot })), chain, layer };
  },
  "changed-files": async (c) => {
    const planned = await planDelta(c);
    // A planned delta's manifest is the Worker's own serialisation.
    return storeWalkedManifest(c, planned.manifestText, new TextEncoder().encode(planned.manifestText).byteLength, planned.delta);
  },
  walk: async (c) => {
    const { text, bytes } = await readManifestBounded(c.d.config, c.p, await c.agent.manifest(c.p.path));
    return storeWalkedManifest(c, text, bytes);
  },
};

export const stagedArchive = (p: BackupParams, s: BackupStrategy) => sandboxPaths.staged(p.snapshotId, s.format);

/**
 * A manifest made by a walk of its own (a second read of the tree) goes to the store, then the archive is made. It is
 * small JSON (about 150 bytes a file), not archive bytes: buffering it is fine.
 */
async function storeWalkedManifest(c: ArchiveContext, text: string, bytes: number, delta?: ArchiveResult["delta"]): Promise<ArchiveResult> {
  const walked = JSON.parse(text) as { totals: ManifestTotals; entries: unknown[] };
  checkManifestBounds(c.d.config, c.p, { bytes, entries: walked.entries.length });
  await c.d.store.put(manifestKey(c.p.snapshotId), text, { contentType: "application/json" });
  return archiveTail(c, { manifest: { ...walked.totals, manifestBytes: text.length, ms: since(c.started) }, delta });
}

/** Once the manifest is stored: a streaming path archives during transfer; a staging one archives to a file now. */
async function archiveTail(c: ArchiveContext, made: { manifest: ManifestTotals; delta?: ArchiveResult["delta"]; archiveRoot?: string }): Promise<ArchiveResult> {
  const { p, s, agent, started } = c;
  const { manifest, delta, archiveRoot } = made;
  if (BACKUP_TRANSFERS[s.path].streamsArchive) {
    // Streaming paths archive during transfer; this phase only took the manifest (and planned a delta).
    return { ms: since(started), bytes: 0, overlapped: true, manifest, delta, ...(archiveRoot ? { archiveRoot } : {}) };
  }
  const staged = stagedArchive(p, s);
  const format = s.format;
  if (format.kind === "files") throw new SnapflowError("bad_request", `${s.name}: the file-level format is made in one pass during transfer, never staged`, { field: "strategy" });
  const archived = await stagingFits(p, s, manifest.bytes, () => format.kind !== "tar"
    ? agent.makeImage({ path: p.path, output: staged, format })
    : agent.archiveToFile({ path: archiveRoot ?? p.path, output: staged, format, filesFrom: delta?.list }));
  return { ms: since(started), bytes: archived.bytes, sha256: archived.sha256, archiveMs: archived.ms, staged, manifest, delta, ...(archiveRoot ? { archiveRoot } : {}) };
}

/**
 * Single pass: a staged archive and its manifest are made here in one read; a streaming path makes both during
 * transfer, so this phase only says so.
 */
async function singlePassPlan(c: ArchiveContext): Promise<ArchiveResult> {
  const { d, p, s, agent, started } = c;
  if (BACKUP_TRANSFERS[s.path].streamsArchive) return { ms: since(started), bytes: 0, overlapped: true, singlePass: true };
  const staged = stagedArchive(p, s);
  const base = await baseManifestSource(d, p);
  const made = await stagingFits(p, s, undefined, () => agent.archiveToFile({ path: p.path, output: staged, format: s.format as TarFormat, manifestOut: sandboxPaths.manifestOut(p.snapshotId), keepAs: p.snapshotId, ...(base ? { base: base.source, ...(base.layerOver ? { layerOver: base.layerOver } : {}), ...(base.baseKept ? { baseKept: base.baseKept } : {}) } : {}) }));
  const stored = await storeSinglePassManifest(d, p, agent, made);
  return { ms: since(started), bytes: made.bytes, sha256: made.sha256, archiveMs: made.ms, staged, singlePass: true, ...stored };
}

/**
 * An image and its manifest, made by the agent (from one read of the tree where the builder reads tar: squashfs
 * through tar2sqfs; image-with-manifest.ts), the manifest then moved to the store.
 */
async function imagePlan(c: ArchiveContext): Promise<ArchiveResult> {
  const { d, p, s, agent, started } = c;
  const staged = stagedArchive(p, s);
  const made = await stagingFits(p, s, undefined, () => agent.makeImage({ path: p.path, output: staged, format: s.format as ImageFormat, manifestOut: sandboxPaths.manifestOut(p.snapshotId) }));
  const stored = await storeSinglePassManifest(d, p, agent, made);
  return { ms: since(started), bytes: made.bytes, sha256: made.sha256, archiveMs: made.ms, staged, singlePass: made.onePass, ...stored };
}

/**
 * A staged archive that filled the sandbox's disk (the agent's 507: it removed the partial file) is a permanent
 * failure saying what did not fit and that a streaming strategy stages nothing; any other failure passes through.
 */
async function stagingFits<T>(p: BackupParams, s: BackupStrategy, treeBytes: number | undefined, make: () => Promise<T>): Promise<T> {
  try {
    return await make();
  } catch (e) {
    if (!(e instanceof AgentCallError) || e.status !== 507) throw e;
    const tree = treeBytes === undefined ? "" : ` (the tree is ${treeBytes} bytes; the archive needs up to that much)`;
    throw new SnapflowError("insufficient_space", `staging ${stagedArchive(p, s)} in sandbox ${p.sandboxId} for ${s.name} ran out of disk${tree}; free space there, or use a streaming strategy (e.g. tar-zst-pipe), which stages nothing. ${e.message}`, { cause: e });
  }
}

/** What changed since the base snapshot: the agent compares the tree with the base's manifest. */
async function planDelta(c: ArchiveContext) {
  const { d, p, agent } = c;
  const base = await d.store.get(manifestKey(p.baseSnapshotId!));
  if (!base) throw new SnapflowError("snapshot_unusable", `base snapshot ${p.baseSnapshotId}'s manifest is missing from the store`);
  const list = sandboxPaths.deltaList(p.snapshotId);
  const plan = await agent.delta(p.path, list, base.body);
  await d.store.put(deletedKey(p.snapshotId), JSON.stringify(plan.deleted), { contentType: "application/json" });
  return {
    manifestText: JSON.stringify(plan.manifest),
    delta: { list, changed: plan.changed, deleted: plan.deleted.length, changedBytes: plan.changedBytes },
  };
}
