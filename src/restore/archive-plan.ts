// The archive plan: a tar archive or an image (and, for changed-files deltas, the chain of layers back to a full
// snapshot) brought by the strategy's transfer path — piped into the extractor, or to a staging file that its
// materialization then extracts or mounts.
import type { ArchiveFormat } from "../../container/contract/protocol.ts";
import type { StepResult } from "../snapshots/records.ts";
import { SnapflowError } from "../errors.ts";
import { AgentCallError } from "../sandbox/agent-client.ts";
import { checkStrategyRuns } from "../strategies/check-strategy-runs.ts";
import { since } from "../phases/phase-runner.ts";
import { sandboxPaths } from "../sandbox/sandbox-paths.ts";
import { getJson, manifestKey, readSnapshot, type SnapshotRecord } from "../snapshots/records.ts";
import { manifestSource } from "../snapshots/manifest-source.ts";
import { tenantOf } from "../snapshots/tenant.ts";
import { archiveFamily, formatName, isImage, type RestoreStrategy } from "../strategies/registry.ts";
import { MATERIALIZATIONS } from "./materialize/index.ts";
import type { RestoreContext } from "./restore-context.ts";
import type { Layer, RestoreProbeResult } from "./restore-params.ts";
import type { RestorePlan } from "./restore-plan.ts";
import { checkTarget } from "./target-check.ts";
import { settled } from "../phases/settled.ts";
import { RESTORE_TRANSFERS, type Destination } from "./transfer/index.ts";
import { usableNow } from "./materialize/lazy.ts";

const MAX_LAYERS = 100;

/** Where an archive lands in the sandbox. A mounted image stays there as long as the mount, so it has its own place. */
const stagingPath = (c: RestoreContext, format: ArchiveFormat) =>
  isImage(format) ? sandboxPaths.image(c.p.restoreId, format) : sandboxPaths.staged(c.p.restoreId, format);

/** The materialization of an archive plan; an overlay strategy has the overlay plan (plans.ts planOf), never this one. */
function materializationFor(s: RestoreStrategy) {
  if (s.materialize === "overlay") throw new Error(`${s.name}: an overlay strategy reached the archive plan (plans.ts planOf chooses the overlay plan for it)`);
  return MATERIALIZATIONS[s.materialize];
}
const materializationOf = (c: RestoreContext) => materializationFor(c.s);
/** The materialization's way of making its tree at the target, when this restore may use it (Materialization.atTarget). */
const atTargetOf = (c: RestoreContext, probed: RestoreProbeResult) => {
  const at = RESTORE_TRANSFERS[c.s.path].piped ? undefined : materializationOf(c).atTarget;
  return at && (at.when?.(probed) ?? true) ? at : undefined;
};

const manifestUrl = (c: RestoreContext, snapshotId: string) => c.d.presigner.url(manifestKey(snapshotId), "GET");
const storedManifest = (m: SnapshotRecord["manifest"]) => ({ key: m.key, ...(m.sha256 ? { sha256: m.sha256 } : {}), ...(m.layerOf ? { layerOf: m.layerOf } : {}), ...(m.fromIndex ? { fromIndex: m.fromIndex } : {}) });

/** Layer i's tree manifest: its own, and for a tar delta's layer manifest, the manifests of the layers below it. */
const layerManifest = (c: RestoreContext, layers: Layer[], i: number) =>
  manifestSource(c.d.presigner, layers[i]!.manifest!, layers[i]!.manifest!.layerOf ? layers.slice(0, i).map((l) => l.manifest!) : undefined);

/**
 * Where layer i goes. Piped: into tar at the target, each entry checked against that layer's snapshot manifest as
 * it passes (only the entries it holds, for a layer of a chain), and the whole tree's metadata walked after the
 * last layer. Staged: a file that materialize extracts or mounts.
 */
async function destinationOf(c: RestoreContext, probed: RestoreProbeResult, i: number): Promise<Destination> {
  const { s } = c;
  if (!RESTORE_TRANSFERS[s.path].piped || s.format.kind !== "tar") return { output: stagingPath(c, probed.snapshot.format) };
  const chain = probed.layers.length > 1;
  const last = i === probed.layers.length - 1;
  // The strategy's format picks the decompressor (gzip -d reads a pigz archive), matching its `requires`.
  return { extract: { path: probed.swap.staged, format: s.format, expected: probed.layers[i]!.manifest ? await layerManifest(c, probed.layers, i) : { url: await manifestUrl(c, probed.layers[i]!.id) }, complete: !chain, walk: last, keepOwnership: c.p.keepOwnership } };
}

/** Is this restore's own image mounted at the target (a swap that got as far as mounting it there)? */
async function ownMountAt(c: RestoreContext, probed: RestoreProbeResult): Promise<boolean> {
  const image = stagingPath(c, probed.snapshot.format);
  const lazy = sandboxPaths.lazy(c.p.restoreId);
  // A lazy mount's image is its FUSE file (under its work directory), and lazy-overlay's lower is its own place.
  const ours = (source: string | undefined) => source === image || (!!source && (source.startsWith(lazy.work + "/") || source === lazy.lower));
  return (await c.agent.mounts()).mounts.some((m) => m.path === c.p.path && ours(m.source));
}

export const archivePlan: RestorePlan = {
  keeps: (s) => materializationFor(s).keeps,
  servesCheckedImage: (s) => materializationFor(s).keeps === "image" || materializationFor(s).servesImage === true,
  async probe(c, snapshot) {
    const { d, p, s, agent } = c;
    if (snapshot.delta?.kind === "overlay-upper") throw new SnapflowError("snapshot_unusable", `snapshot ${p.snapshotId} is an overlay delta: restore it with overlay-restore`, { field: "strategy" });
    if (archiveFamily(snapshot.format) !== archiveFamily(s.format)) {
      throw new SnapflowError("bad_request", `strategy ${s.name} restores ${formatName(s.format)} archives; snapshot ${p.snapshotId} is ${formatName(snapshot.format)}`, { field: "strategy" });
    }
    // The sandbox's tools and its target, asked at once (a lazy restore's usable time waits for this step); failures
    // answered in the order they were asked before: what the sandbox cannot run first.
    const [tools, target] = await Promise.allSettled([c.asked?.tools ?? agent.probe(), c.asked?.target ?? checkTarget(c)]);
    checkStrategyRuns(s, settled(tools), p.sandboxId);
    settled(target);
    const layers: Layer[] = [{ id: snapshot.id, format: snapshot.format, archive: snapshot.archive, deletedKey: snapshot.delta?.deletedKey, manifest: storedManifest(snapshot.manifest) }];
    for (let base = snapshot.delta?.base; base; ) {
      if (layers.length >= MAX_LAYERS) throw new SnapflowError("snapshot_unusable", `snapshot ${p.snapshotId} has more than ${MAX_LAYERS} layers of deltas`);
      const record = await readSnapshot(d.store, d.kv, base);
      if (!record) throw new SnapflowError("snapshot_unusable", `snapshot ${p.snapshotId} is a delta on ${base}, which does not exist any more`);
      if (archiveFamily(record.format) !== archiveFamily(s.format)) throw new SnapflowError("snapshot_unusable", `base snapshot ${base} is ${formatName(record.format)}; ${s.name} restores ${formatName(s.format)}`);
      if (tenantOf(record) !== tenantOf(snapshot)) throw new SnapflowError("snapshot_unusable", `snapshot ${p.snapshotId} is a delta on ${base}, another tenant's snapshot`);
      layers.unshift({ id: record.id, format: record.format, archive: record.archive, deletedKey: record.delta?.deletedKey, manifest: storedManifest(record.manifest) });
      base = record.delta?.base;
    }
    if (layers.length > 1 && !RESTORE_TRANSFERS[s.path].piped) throw new SnapflowError("bad_request", `snapshot ${p.snapshotId} is a delta: restore it with a pipe strategy (e.g. presigned-tar-zst-pipe)`, { field: "strategy" });
    const { id, format, archive, manifest, chunks, tenant } = snapshot;
    return { snapshot: { id, format, archive, manifest, ...(chunks ? { chunks, ...(tenant ? { tenant } : {}) } : {}) }, layers };
  },

  async transfer(c, probed) {
    const { d, p, s, agent } = c;
    const t = performance.now();
    const path = RESTORE_TRANSFERS[s.path];
    if (path.piped && s.format.kind !== "tar") throw new SnapflowError("bad_request", `${s.name}: images cannot be piped into an extractor`, { field: "strategy" });
    // A retry starts from an empty staged tree, so a half-extracted earlier attempt leaves nothing behind. The
    // target itself is not touched: verify swaps the new tree in (tree-swap.ts).
    if (path.piped) await agent.deleteFile(probed.swap.staged);
    let bytes = 0;
    let agentMs = 0;
    let verified: unknown;
    let engine: string | undefined;
    for (const [i, layer] of probed.layers.entries()) {
      // A delta's deletions go first: extracting it afterwards restores the mtimes of the directories they touched.
      if (i > 0 && layer.deletedKey) {
        const deleted = await getJson<string[]>(d.store, layer.deletedKey);
        if (!deleted) throw new SnapflowError("snapshot_unusable", `the deletions of delta ${layer.id} are missing from the store`);
        if (deleted.length) await agent.removeEntries(probed.swap.staged, deleted);
      }
      const got = await path.bring(c, layer, await destinationOf(c, probed, i));
      if ("verified" in got) verified = got.verified;
      if (got.bytes !== layer.archive.bytes || got.sha256 !== layer.archive.sha256) {
        throw new SnapflowError("transfer_damaged", `archive of ${layer.id} arrived damaged: ${got.bytes} bytes sha256 ${got.sha256}, expected ${layer.archive.bytes} bytes sha256 ${layer.archive.sha256}`);
      }
      bytes += got.bytes;
      agentMs += got.ms;
      engine = got.engine;
    }
    const last = probed.layers.at(-1)!;
    // agentMs: the sandbox's own time for the bytes (the rest of the step is signing, the call and its answer)
    const brought = { bytes, sha256: last.archive.sha256, layers: probed.layers.length, agentMs, ...(engine ? { engine } : {}), ...(path.piped ? { extractedWhileReceiving: true } : {}), ...(verified ? { verified } : {}) };
    if (!atTargetOf(c, probed)) return { ms: since(t), ...brought };
    // A tree made at the target (a lazy mount, a trusted image) needs nothing built beside it: it goes in here, usable a
    // step sooner, and no materialize step follows (run-restore.ts). A retried transfer clears an earlier attempt's
    // mount while it prepares, and the swap answers a tree already at the target as made.
    const making = Date.now();
    const made = await makeAtTarget(c, probed);
    return { ...made, ...brought, ms: since(t), materializeMs: made.ms, usableAfterMaterializeMs: Date.now() - making };
  },

  async materialize(c, probed) {
    if (RESTORE_TRANSFERS[c.s.path].piped) return { ms: 0, bytes: 0, overlapped: true };
    // A tree made at the target goes in at the end of the transfer, and this step does not run for it; a run whose
    // transfer came before that (one in flight across a deploy) makes it here.
    if (atTargetOf(c, probed)) return makeAtTarget(c, probed);
    const t = performance.now();
    const m = materializationOf(c);
    const dir = probed.swap.staged;
    // A retried step finds the earlier attempt's mount: take it down before clearing the staged tree.
    await m.undo(c, dir);
    await c.agent.deleteFile(dir);
    const format = checkedFormat(c, probed);
    // Tar: the strategy's format picks the decompressor, as in transfer; entries are checked as they stream into tar.
    c.probed = probed.snapshot;
    return m.materialize(c, stagingPath(c, format), isImage(format) ? format : c.s.format, { url: await manifestUrl(c, probed.snapshot.id) }, dir);
  },

  swapIn: (c, probed) => swapInArchive(c, probed),

  async afterSwap(c, probed, check) {
    // Only a tree that went in before its check is checked here; the others were, beside the target.
    const m = atTargetOf(c, probed) ? materializationOf(c) : undefined;
    return m?.afterSwap ? m.afterSwap(c, check) : {};
  },

  verify(c, _probed, check) {
    const m = materializationOf(c);
    return m.verify ? m.verify(c, check) : check();
  },

  async cleanup(c, probed) {
    // A mount made by materialize (beside the target, or at it after a swap) must go before its backing file can,
    // and before the rollback can put the old tree back.
    const m = materializationOf(c);
    await m.undo(c, probed.swap.staged);
    if (m.mounts && (await ownMountAt(c, probed))) await m.undo(c, c.p.path);
    await c.agent.deleteFile(stagingPath(c, probed.snapshot.format));
  },
};

/** The snapshot's format, refused when the strategy cannot make a tree of it (a tar archive, an image strategy). */
function checkedFormat(c: RestoreContext, probed: RestoreProbeResult): ArchiveFormat {
  const format = probed.snapshot.format;
  if (format.kind === "tar" && c.s.format.kind !== "tar") throw new SnapflowError("bad_request", `${c.s.name} cannot extract a ${formatName(format)} archive`, { field: "strategy" });
  return format;
}

/**
 * A tree its materialization makes at the target (Materialization.atTarget): what backs it started (an earlier
 * attempt's leftovers cleared while it prepares), then swapped in, usable at once; verify checks it there (afterSwap).
 */
async function makeAtTarget(c: RestoreContext, probed: RestoreProbeResult): Promise<StepResult> {
  const t = performance.now();
  const atTarget = atTargetOf(c, probed)!;
  const format = checkedFormat(c, probed);
  c.probed = probed.snapshot;
  const made = atTarget.prepare ? atTarget.prepare(c, format, probed) : await materializationOf(c).materialize(c, stagingPath(c, format), isImage(format) ? format : c.s.format, { url: await manifestUrl(c, probed.snapshot.id) }, probed.swap.staged);
  const swapped = await swapInArchive(c, probed);
  return { ...made, ...usableNow(c, swapped), ms: since(t) };
}

/** The archive plan's swap (RestorePlan.swapIn); makeAtTarget calls it too, for a tree made at the target. */
async function swapInArchive(c: RestoreContext, probed: RestoreProbeResult): ReturnType<RestorePlan["swapIn"]> {
  const m = RESTORE_TRANSFERS[c.s.path].piped ? undefined : materializationOf(c);
  const format = probed.snapshot.format;
  const materializeAt = async (dir: string) => m!.materialize(c, stagingPath(c, format), isImage(format) ? format : c.s.format, { url: await manifestUrl(c, probed.snapshot.id) }, dir);
  const atTarget = atTargetOf(c, probed);
  if (atTarget) {
    // Nothing was mounted beside the target: an empty directory goes in, and the agent makes the tree at the target,
    // once, in the same call.
    const mount = atTarget.mount(c, format);
    const explained = async (e: unknown): Promise<never> => {
      throw atTarget.failed ? await atTarget.failed(c, e) : e;
    };
    const swapped = await c.agent.swapIn(c.p.path, c.p.restoreId, { mount }).catch(goneIs404).catch(explained);
    if (swapped) return { ...swapped, remounted: "over what still ran" as const };
    // What backed it is gone (an agent restart; the swap itself is done): started again (materialize clears what
    // is left of it first), then mounted at the target.
    await materializeAt(probed.swap.staged);
    const again = await c.agent.swapIn(c.p.path, c.p.restoreId, { mount }).catch(goneIs404).catch(explained);
    if (!again) throw new SnapflowError("agent_error", `restore ${c.p.restoreId}: the tree could not be mounted at ${c.p.path} even after its mount was made again`);
    return { ...again, remounted: "from scratch" as const };
  }
  // A mount point cannot be renamed: the verified image is unmounted beside the target and mounted again at it.
  if (m?.mounts) await m.undo(c, probed.swap.staged);
  const swapped = await c.agent.swapIn(c.p.path, c.p.restoreId);
  if (m?.mounts && !(await ownMountAt(c, probed))) {
    await materializeAt(c.p.path);
    return { ...swapped, remounted: "from scratch" as const };
  }
  return swapped;
}

/** A 404 from a swap that mounts: what the mount needed is gone (an agent restart), answered as undefined. */
function goneIs404(e: unknown): undefined {
  if (e instanceof AgentCallError && e.status === 404 && e.field?.startsWith("mount.")) return undefined;
  throw e;
}
