// The overlay plan (overlay-restore): a writable workspace as a read-only base image plus a layer of changes, the
// seeds' incremental scheme. The base (a squashfs snapshot) is fetched and mounted with squashfuse; an
// overlay-delta snapshot's archive (the upper directory it was taken from, whiteouts included) is extracted into
// a new upper directory; overlayfs then joins them at the target, where writes land in the upper again, ready for
// the next overlay-delta backup. Restoring a plain squashfs snapshot this way gives the same writable workspace
// with an empty layer.
//
// A chunked base (lazy-overlay-restore) is not downloaded: the transfer brings its index, and the base is mounted
// lazily (snapflow-lazy, as the lazy materialization does), so a fork — a chunked parent plus the few megabytes its
// overlay delta holds — is usable before the parent is local: materialize swaps it in at once, with its overlay laid
// at the target; verify walks it there and waits until every chunk is local.
import { SnapflowError } from "../errors.ts";
import { checkStrategyRuns } from "../strategies/check-strategy-runs.ts";
import { since } from "../phases/phase-runner.ts";
import { sandboxPaths } from "../sandbox/sandbox-paths.ts";
import { manifestKey, readSnapshot, type SnapshotRecord } from "../snapshots/records.ts";
import { archiveFamily, formatName } from "../strategies/registry.ts";
import type { RestoreContext } from "./restore-context.ts";
import type { Layer, RestoreProbeResult } from "./restore-params.ts";
import type { RestorePlan } from "./restore-plan.ts";
import { checkTarget } from "./target-check.ts";
import { afterLazySwap, startLazyMount, usableNow } from "./materialize/lazy.ts";

const layer = (r: SnapshotRecord): Layer => ({ id: r.id, format: r.format, archive: r.archive });

/** The base image first, then the upper layer when the snapshot is an overlay delta. */
async function overlayLayers({ d, s }: RestoreContext, snapshot: SnapshotRecord): Promise<Layer[]> {
  // A whole image is downloaded and mounted (overlay-restore); a chunked one mounted lazily (lazy-overlay-restore).
  const readable = (base: SnapshotRecord) => {
    if (archiveFamily(base.format) !== archiveFamily(s.format)) {
      throw new SnapflowError("bad_request", `${s.name} mounts a ${formatName(s.format)} base; ${base.id} is ${formatName(base.format)}${base.format.kind === "squashfs" ? `: restore it with ${base.format.chunks ? "lazy-overlay-restore" : "overlay-restore"}` : ""}`, { field: "strategy" });
    }
  };
  if (snapshot.delta?.kind === "overlay-upper") {
    const base = await readSnapshot(d.store, d.kv, snapshot.delta.base);
    if (!base) throw new SnapflowError("snapshot_unusable", `overlay delta ${snapshot.id} is on ${snapshot.delta.base}, which does not exist any more`);
    if (base.format.kind !== "squashfs") throw new SnapflowError("snapshot_unusable", `overlay delta ${snapshot.id}'s base ${base.id} is ${formatName(base.format)}, not a squashfs image`);
    readable(base);
    return [layer(base), layer(snapshot)];
  }
  if (snapshot.format.kind !== "squashfs") throw new SnapflowError("bad_request", `${s.name} mounts a squashfs base; snapshot ${snapshot.id} is ${formatName(snapshot.format)}`, { field: "strategy" });
  readable(snapshot);
  return [layer(snapshot)];
}

const isChunked = (l: Layer) => l.format.kind === "squashfs" && !!l.format.chunks;

export const overlayPlan: RestorePlan = {
  async probe(c, snapshot) {
    checkStrategyRuns(c.s, await c.agent.probe(), c.p.sandboxId);
    await checkTarget(c);
    const layers = await overlayLayers(c, snapshot);
    const { id, format, archive, manifest } = snapshot;
    return { snapshot: { id, format, archive, manifest }, layers };
  },

  async transfer({ d, p, agent }, { layers, snapshot }) {
    const t = performance.now();
    const where = sandboxPaths.overlay(p.restoreId);
    const url = (l: Layer) => d.presigner.url(l.archive.key, "GET");
    const [base, upper] = layers;
    const got = [await agent.downloadFromUrl({ url: await url(base!), output: where.image })];
    if (upper) {
      if (upper.format.kind !== "tar") throw new SnapflowError("snapshot_unusable", `overlay delta ${upper.id} is not a tar archive`);
      await agent.deleteFile(where.upper);
      got.push(await agent.downloadFromUrl({ url: await url(upper), extract: { path: where.upper, format: upper.format } }));
    }
    got.forEach((g, i) => {
      const want = layers[i]!.archive;
      if (g.bytes !== want.bytes || g.sha256 !== want.sha256) throw new SnapflowError("transfer_damaged", `archive of ${layers[i]!.id} arrived damaged: sha256 ${g.sha256}, expected ${want.sha256}`);
    });
    // The upper's opaque directories (deleted and made again in the fork) lost overlayfs' mark in tar: the layer
    // manifest lists them, and the agent marks them again before anything mounts the upper.
    const opaque = upper && snapshot.manifest.layerOf ? await agent.markOpaque({ upper: where.upper, layer: { url: await d.presigner.url(manifestKey(snapshot.id), "GET"), ...(snapshot.manifest.sha256 ? { sha256: snapshot.manifest.sha256 } : {}) } }) : undefined;
    return { ms: since(t), bytes: got.reduce((n, g) => n + g.bytes, 0), layers: layers.length, ...(opaque ? { opaque: opaque.marked } : {}) };
  },

  async materialize(c, probed) {
    const { p, agent } = c;
    const { layers, swap } = probed;
    const t = performance.now();
    const where = sandboxPaths.overlay(p.restoreId);
    const base = layers[0]!;
    if (base.format.kind !== "squashfs") throw new SnapflowError("snapshot_unusable", `overlay base ${base.id} is not squashfs`);
    const lazy = sandboxPaths.lazy(p.restoreId);
    // A retry finds the earlier attempt's mounts: take them down first (the overlay goes with its lower, the lower
    // with a lazy base's FUSE file), in one call. The upper layer is this restore's own (it follows the overlay
    // to the target): a plain snapshot starts with an empty one, an overlay delta with what transfer extracted.
    const clear = agent.clear({ unmount: [where.lower, `${lazy.work}/fuse`], remove: [swap.staged, ...(layers.length === 1 ? [where.upper] : [])] });
    if (isChunked(base)) {
      // The transfer brought the base's index to where.image; each chunk is fetched on first read, verified, cached.
      // Its tree is checked at the target (afterSwap), so it goes in now, its overlay laid at the target once: usable
      // at once.
      const { signed, clearMs, mounted } = await startLazyMount(c, { snapshotId: base.id, index: where.image, format: base.format, lower: where.lower, clear });
      const swapped = await swapInOverlay(c, probed);
      // The base mount's parts: the helper's start (exec → ready line) and the image mounted over its FUSE file.
      return { ms: since(t), bytes: 0, clearMs, signedMs: signed.ms, baseMountMs: mounted.ms, baseFuseMs: mounted.fuseMs, baseImageMountMs: mounted.mountMs, upper: where.upper, lazy: true, ...usableNow(c, swapped) };
    }
    // A downloaded base's overlay goes beside the target, where verify checks it before the swap.
    await clear;
    const baseMountMs = (await agent.materialize({ archive: where.image, path: where.lower, format: base.format, how: "mount-fuse" })).ms;
    const overlay = await agent.mountOverlay({ lower: where.lower, path: swap.staged, how: "kernel", upper: where.upper });
    return { ms: since(t), bytes: 0, baseMountMs, overlayMs: overlay.ms, upper: overlay.upper };
  },

  swapIn: (c, probed) => swapInOverlay(c, probed),

  async cleanup(c, { swap }) {
    const { p, agent } = c;
    const where = sandboxPaths.overlay(p.restoreId);
    // Ours only: the overlay beside the target or, after a swap, at it; then its lower. What was at the target
    // before is the rollback's to put back.
    await agent.unmount(swap.staged).catch(() => {});
    if (await ownOverlayAt(c)) await agent.unmount(p.path);
    await agent.unmount(where.lower).catch(() => {});
    // A lazy base's FUSE file (unmounting it stops its helper), and its work directory.
    const lazy = sandboxPaths.lazy(p.restoreId);
    await agent.unmount(`${lazy.work}/fuse`).catch(() => {});
    for (const path of [where.image, where.lower, where.layer, lazy.work]) await agent.deleteFile(path).catch(() => {});
  },

  // A lazy base serves only chunks checked against their SHA-256, and its delta arrived hash-checked: the fork went in
  // at the end of materialize; here the walk at the target, and a wait until every chunk is local and verified (or a
  // failure naming the chunk that cannot be had). The restore records both moments.
  async afterSwap(c, { layers }, check) {
    return isChunked(layers[0]!) ? afterLazySwap(c, layers[0]!.id, check) : {};
  },
};

/**
 * A mount point cannot be renamed: the overlay is taken down beside the target (its lower and upper stay) and laid
 * again at the target over the same layers. Over a lazy base it was never beside the target: an empty directory is
 * swapped in for it. Either way the agent's swap lays the overlay at the target in the same call, and answers a
 * retry's overlay, already there, as made; a lower whose mount went (an agent restart) is a 404 naming it.
 */
async function swapInOverlay(c: RestoreContext, probed: RestoreProbeResult): ReturnType<RestorePlan["swapIn"]> {
  const { p, agent } = c;
  const where = sandboxPaths.overlay(p.restoreId);
  if (!isChunked(probed.layers[0]!)) await agent.unmount(probed.swap.staged).catch(() => {});
  return agent.swapIn(p.path, p.restoreId, { mount: { kind: "overlay", lower: where.lower, upper: where.upper, how: "kernel" } });
}

/** Is this restore's overlay (over its own lower) mounted at the target? */
async function ownOverlayAt({ p, agent }: RestoreContext): Promise<boolean> {
  const lower = sandboxPaths.overlay(p.restoreId).lower;
  return (await agent.mounts()).mounts.some((m) => m.path === p.path && m.kind === "overlay" && m.source === lower);
}
