// The overlay plan (overlay-restore): a writable workspace as a read-only base image plus layers of changes, the
// seeds' incremental scheme. The base (a squashfs snapshot) is fetched and mounted with squashfuse; an
// overlay-delta snapshot is the last link of a chain (overlay-chain.ts: the image, then each delta in the order
// they were taken, each one the upper directory of a workspace woken from the one before, whiteouts included).
// Each delta's archive is extracted into a read-only layer directory of its own (its opaque directories marked
// again), a read-only overlay stacks them over the image, and a writable overlay with a fresh, empty upper joins
// that at the target: writes land in the upper, which holds only what changes after this wake — the next
// overlay-delta backup uploads that, with this snapshot as its parent. Restoring a plain squashfs snapshot this way
// gives the same writable workspace over the image alone.
//
// A chunked base (lazy-overlay-restore) is not downloaded: the transfer brings its index, and the base is mounted
// lazily (snapflow-lazy, as the lazy materialization does), so a fork — a chunked parent plus the few megabytes its
// overlay deltas hold — is usable before the parent is local: materialize swaps it in at once, with its overlay laid
// at the target; verify walks it there and waits until every chunk is local.
//
// A file-level base (files-overlay-restore) is not an image: snapflow-lazy files-mount fetches its index (checked
// against the record's SHA-256), and serves the index's tree at the image's place (beside the deltas' extraction);
// the rest is as for a chunked base. Alone (no tar deltas over it: a wake's layers are in its index chain), its
// overlay goes in at the target at the end of the transfer, a step sooner than materialize: a wake waits for one
// step fewer. A compaction's wake (p.compactor) fetches on demand only and waits for nothing: its backup reads only
// the names the layers hold (filecas lower.go).
import { SnapflowError } from "../errors.ts";
import { AgentCallError } from "../sandbox/agent-client.ts";
import { checkStrategyRuns } from "../strategies/check-strategy-runs.ts";
import { since } from "../phases/phase-runner.ts";
import { settled } from "../phases/settled.ts";
import { sandboxPaths } from "../sandbox/sandbox-paths.ts";
import { manifestKey, type SnapshotRecord } from "../snapshots/records.ts";
import { isChainBase, readOverlayChain } from "../snapshots/overlay-chain.ts";
import type { TarFormat } from "../../container/contract/protocol.ts";
import { archiveFamily, formatName } from "../strategies/registry.ts";
import type { RestoreContext } from "./restore-context.ts";
import type { Layer, RestoreProbeResult } from "./restore-params.ts";
import type { RestorePlan } from "./restore-plan.ts";
import { checkTarget } from "./target-check.ts";
import { afterLazySwap, PREFETCH, startLazyMount, usableNow } from "./materialize/lazy.ts";
import { walkThenComplete } from "./materialize/lazy-completion.ts";
import { filesSnapshot, packKeysOf, signedPacks } from "./files-packs.ts";
import { signedChain } from "../snapshots/index-chain.ts";

const layer = (r: SnapshotRecord): Layer => ({
  id: r.id, format: r.format, archive: r.archive, manifest: { key: r.manifest.key, ...(r.manifest.sha256 ? { sha256: r.manifest.sha256 } : {}), ...(r.manifest.layerOf ? { layerOf: r.manifest.layerOf } : {}), ...(r.manifest.fromIndex ? { fromIndex: r.manifest.fromIndex } : {}) },
  // A file-level base's packs, named by the record the probe read: the transfer signs them without reading it again.
  ...(r.format.kind === "files" && r.files ? { packKeys: packKeysOf(r as SnapshotRecord & { files: NonNullable<SnapshotRecord["files"]> }) } : {}),
  ...(r.files?.chain?.length ? { chain: r.files.chain } : {}),
});

/** The base image first, then each overlay delta of the snapshot's chain, the snapshot last (an image: itself alone). */
async function overlayLayers({ d, s }: RestoreContext, snapshot: SnapshotRecord): Promise<Layer[]> {
  if (snapshot.delta?.kind !== "overlay-upper" && !isChainBase(snapshot.format)) throw new SnapflowError("bad_request", `${s.name} mounts a squashfs or file-level base; snapshot ${snapshot.id} is ${formatName(snapshot.format)}`, { field: "strategy" });
  // Every link read and checked (it exists, same tenant, its own chain the one before it, a squashfs image or a
  // file-level snapshot first).
  const { image, deltas } = await readOverlayChain(d, snapshot);
  // A whole image is downloaded and mounted (overlay-restore); a chunked one mounted lazily (lazy-overlay-restore).
  if (archiveFamily(image.format) !== archiveFamily(s.format)) {
    const fits = image.format.kind === "files" ? "files-overlay-restore" : image.format.kind === "squashfs" ? (image.format.chunks ? "lazy-overlay-restore" : "overlay-restore") : undefined;
    throw new SnapflowError("bad_request", `${s.name} mounts a ${formatName(s.format)} base; ${image.id} is ${formatName(image.format)}${fits ? `: restore it with ${fits}` : ""}`, { field: "strategy" });
  }
  for (const delta of deltas) if (delta.format.kind !== "tar") throw new SnapflowError("snapshot_unusable", `overlay delta ${delta.id} is not a tar archive`);
  return [image, ...deltas].map(layer);
}

/** Deltas extracted at once. */
const EXTRACT_CONCURRENCY = 4;

const isChunked = (l: Layer) => l.format.kind === "squashfs" && !!l.format.chunks;
/** A file-level base: its index served as a tree by files-mount, straight at the lower (no image over it). */
const isFiles = (l: Layer) => l.format.kind === "files";
/** Mounted before it is local (a chunked image, or a file-level index): the overlay goes in at the target at once. */
const isLazy = (l: Layer) => isChunked(l) || isFiles(l);

export const overlayPlan: RestorePlan = {
  keeps: () => "overlay",
  // Its tree is a merged view of the base image and the layers: walked (and hashed where content-check.ts asks). But a
  // lazy base with no overlay delta over it (every wake of a file-level sleep: its layers are the index's own) is the
  // base served as it is under an empty upper — a file-level index (its SHA-256 and its chain's checked on arrival,
  // each chunk's before it is read), or a chunked image (each chunk's) —: a walk would read back, through FUSE, what
  // the helper made of what was checked. The npm workspace's walk took ~3.5 s of the agent's CPU on every such wake,
  // while first use ran beside it.
  servesCheckedImage: (_s, probed) => (probed?.layers.length !== 1 ? false : isFiles(probed.layers[0]!) ? "index" : isChunked(probed.layers[0]!)),
  async probe(c, snapshot) {
    // Three independent questions (the sandbox's tools, its target, the chain's records), asked at once: a wake waits
    // for this step. Failures are answered in the order they were asked before: what the sandbox cannot run first.
    const [probed, target, chain] = await Promise.allSettled([c.asked?.tools ?? c.agent.probe(), c.asked?.target ?? checkTarget(c), overlayLayers(c, snapshot)]);
    checkStrategyRuns(c.s, settled(probed), c.p.sandboxId);
    settled(target);
    const layers = settled(chain);
    const { id, format, archive, manifest } = snapshot;
    return { snapshot: { id, format, archive, manifest }, layers };
  },

  async transfer(c, probed) {
    const { layers } = probed;
    const { d, p, agent } = c;
    const t = performance.now();
    const where = sandboxPaths.overlay(p.restoreId);
    const url = (l: Layer) => d.presigner.url(l.archive.key, "GET");
    const [base, ...deltas] = layers;
    const check = (l: Layer, g: { bytes: number; sha256: string }) => {
      if (g.bytes !== l.archive.bytes || g.sha256 !== l.archive.sha256) throw new SnapflowError("transfer_damaged", `archive of ${l.id} arrived damaged: sha256 ${g.sha256}, expected ${l.archive.sha256}`);
      return g.bytes;
    };
    // Each delta goes into a read-only layer of its own (an earlier attempt's is made again), its opaque
    // directories (deleted and made again in that wake) marked again from the hash-checked layer manifest: tar
    // does not carry overlayfs' mark. A delta from before layers has no list (its manifest is the whole tree's).
    // An earlier attempt's layers go first, all in one call (a round trip per layer adds up on a deep chain).
    // A file-level base is mounted here, while the deltas are extracted (files-mount fetches and decodes the index,
    // ~0.07-0.1 s for the npm workspace's); an earlier attempt's mounts go first.
    const filesBase = isFiles(base!);
    const imageAt = baseMountPoint(p.restoreId, layers);
    const unmount = filesBase ? [where.lower, ...(deltas.length ? [where.chainImage] : [])] : [];
    // A file-level base alone: files-mount clears its mountpoint first, in its own call.
    const clearInMount = filesBase && !deltas.length;
    if (deltas.length || (unmount.length && !clearInMount)) await agent.clear({ unmount, remove: deltas.length ? [where.chainLayers] : [] });
    let mounted: Awaited<ReturnType<typeof startFilesMount>> | undefined;
    let next = 0;
    let opaque = 0;
    // the longest extraction as the agent timed it (its tar, not the staging and merge around it)
    let deltaExtractMs = 0;
    const extract = async () => {
      let bytes = 0;
      while (next < deltas.length) {
        const i = next++;
        const l = deltas[i]!;
        const dir = where.chainLayer(i + 1);
        // Its layer manifest comes in the same call (fetched while the archive is extracted, then its opaque
        // directories marked): one round trip a delta.
        const layerManifest = l.manifest?.layerOf ? { url: await d.presigner.url(manifestKey(l.id), "GET"), ...(l.manifest.sha256 ? { sha256: l.manifest.sha256 } : {}) } : undefined;
        const got = await agent.downloadFromUrl({ url: await url(l), extract: { path: dir, format: l.format as TarFormat, ...(layerManifest ? { opaque: layerManifest } : {}) } });
        bytes += check(l, got);
        opaque += got.opaque ?? 0;
        deltaExtractMs = Math.max(deltaExtractMs, got.ms);
      }
      return bytes;
    };
    // When the base arrived, and when it (or the deltas) were ready: which of the two the step waited for.
    let baseInMs = 0;
    let baseDoneMs = 0;
    let deltasDoneMs = 0;
    // A file-level base's index is fetched by files-mount itself (checked against its record's SHA-256, kept at
    // where.image): one process from the store to the decoder.
    const baseIn = filesBase
      ? startFilesMount(c, base!, imageAt, clearInMount ? { unmount, remove: [] } : undefined).then((m) => ((mounted = m), base!.archive.bytes))
      : agent.downloadFromUrl({ url: await url(base!), output: where.image }, base!.archive.bytes).then((g) => ((baseInMs = since(t)), check(base!, g)));
    const [baseBytes, ...deltaBytes] = await Promise.all([
      baseIn.then((bytes) => ((baseDoneMs = since(t)), bytes)),
      ...Array.from({ length: Math.min(EXTRACT_CONCURRENCY, deltas.length) }, () => extract().then((b) => ((deltasDoneMs = since(t)), b))),
    ]);
    const baseMount = mounted ? { baseMountMs: mounted.ms, baseReadyMs: mounted.readyMs } : {};
    // (files-mount fetches a file-level base's index itself: no separate moment it is in)
    const timing = { ...(filesBase ? {} : { baseInMs }), baseDoneMs, ...(deltas.length ? { deltasDoneMs, deltaExtractMs } : {}) };
    const done = { bytes: baseBytes! + deltaBytes.reduce((n, b) => n + b, 0), layers: layers.length, ...(deltas.length ? { opaque } : {}), ...baseMount, ...timing };
    if (!clearInMount) return { ms: since(t), ...done };
    // A file-level base alone: nothing is left to build, so its overlay goes in at the target now (one call clears
    // what an earlier attempt left, its upper and staged directory, and lays it). A retried transfer takes the
    // overlay down with the lower it mounts again (the agent unmounts what depends on a mount), and the swap,
    // finding itself done with nothing at the target, lays it again. A base whose mount went in between (an agent
    // restart: a 404 naming the lower, which no retry would mend) is started again, and the swap asked again.
    let restarted: Awaited<ReturnType<typeof startFilesMount>> | undefined;
    const swapped = await swapInOverlay(c, probed, { remove: [probed.swap.staged, where.upper], unmount: [] }).catch(async (e) => {
      if (!(e instanceof AgentCallError && e.status === 404 && e.field === "mount.lower")) throw e;
      restarted = await startFilesMount(c, base!, imageAt);
      return swapInOverlay(c, probed);
    });
    return { ms: since(t), ...done, ...(restarted ? { baseMountMs: restarted.ms, remountedBase: true } : {}), upper: where.upper, lazy: true, ...usableNow(c, swapped) };
  },

  async materialize(c, probed) {
    const { p, agent } = c;
    const { layers, swap } = probed;
    const t = performance.now();
    const where = sandboxPaths.overlay(p.restoreId);
    const base = layers[0]!;
    const lazy = sandboxPaths.lazy(p.restoreId);
    // A chain's image is mounted beside the lower, which is then the read-only stack of the deltas over it.
    const chained = layers.length > 1;
    const imageAt = baseMountPoint(p.restoreId, layers);
    const stack = async () => {
      if (!chained) return undefined;
      const lowers = [...layers.slice(1).map((_, i) => where.chainLayer(i + 1)).reverse(), where.chainImage];
      return (await agent.mountOverlayStack({ path: where.lower, lowers })).ms;
    };
    // (A file-level base alone was swapped in by the transfer: this step does not run for it.)
    if (isFiles(base)) {
      // Chained (the base alone went above): the transfer mounted the base (files-mount at imageAt). A retry finds
      // the earlier attempt's stack and upper (taken down and emptied); a mount gone since (an agent restart) is
      // started again.
      const [listed] = await Promise.all([agent.mounts(), agent.clear({ unmount: [where.lower], remove: [swap.staged, where.upper] })]);
      const clearMs = since(t);
      const alive = listed.mounts.some((m) => m.path === imageAt && m.kind === "lazy");
      const remounted = alive ? undefined : await startFilesMount(c, base, imageAt);
      const stackMs = await stack();
      const swapped = await swapInOverlay(c, probed);
      return { ms: since(t), bytes: 0, clearMs, ...(remounted ? { baseMountMs: remounted.ms, remountedBase: true } : {}), ...(stackMs !== undefined ? { stackMs } : {}), upper: where.upper, lazy: true, ...usableNow(c, swapped) };
    }
    // A retry finds the earlier attempt's mounts: take them down first (the overlay goes with its lower, the lower
    // with a lazy base's FUSE file), in one call. The upper is this restore's own (it follows the overlay to the
    // target) and starts empty: what the next delta holds.
    if (base.format.kind !== "squashfs") throw new SnapflowError("snapshot_unusable", `overlay base ${base.id} is neither squashfs nor file-level`);
    const clear = agent.clear({ unmount: [where.lower, ...(chained ? [where.chainImage] : []), `${lazy.work}/fuse`], remove: [swap.staged, where.upper] });
    if (isChunked(base)) {
      // The transfer brought the base's index to where.image; each chunk is fetched on first read, verified, cached.
      // Its tree is checked at the target (afterSwap), so it goes in now, its overlay laid at the target once: usable
      // at once.
      const { signed, clearMs, mounted } = await startLazyMount(c, { snapshotId: base.id, index: where.image, format: base.format, lower: imageAt, clear });
      const stackMs = await stack();
      const swapped = await swapInOverlay(c, probed);
      // The base mount's parts: the helper's start (exec → ready line) and the image mounted over its FUSE file.
      return { ms: since(t), bytes: 0, clearMs, signedMs: signed.ms, baseMountMs: mounted.ms, baseFuseMs: mounted.fuseMs, baseImageMountMs: mounted.mountMs, ...(stackMs !== undefined ? { stackMs } : {}), upper: where.upper, lazy: true, ...usableNow(c, swapped) };
    }
    // A downloaded base's overlay goes beside the target, where verify checks it before the swap.
    await clear;
    const baseMountMs = (await agent.materialize({ archive: where.image, path: imageAt, format: base.format, how: "mount-fuse" })).ms;
    const stackMs = await stack();
    const overlay = await agent.mountOverlay({ lower: where.lower, path: swap.staged, how: "kernel", upper: where.upper });
    return { ms: since(t), bytes: 0, baseMountMs, ...(stackMs !== undefined ? { stackMs } : {}), overlayMs: overlay.ms, upper: overlay.upper };
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
    await agent.unmount(where.chainImage).catch(() => {});
    // A lazy base's FUSE file (unmounting it stops its helper), and its work directory.
    const lazy = sandboxPaths.lazy(p.restoreId);
    await agent.unmount(`${lazy.work}/fuse`).catch(() => {});
    for (const path of [where.image, where.lower, where.chainImage, where.layer, lazy.work]) await agent.deleteFile(path).catch(() => {});
  },

  // A lazy base serves only chunks checked against their SHA-256, and its delta arrived hash-checked: the fork went in
  // at the end of materialize; here the walk at the target, and a wait until every chunk is local and verified (or a
  // failure naming the chunk that cannot be had). The restore records both moments.
  async afterSwap(c, { layers }, check) {
    if (isFiles(layers[0]!)) {
      if (c.p.compactor) return { lazy: "on demand only: the compaction reads what its layers changed" };
      return walkThenComplete(c, sandboxPaths.lazy(c.p.restoreId).work, check);
    }
    return isChunked(layers[0]!) ? afterLazySwap(c, layers[0]!.id, check) : {};
  },
};

/** Where the base is mounted: beside the lower when deltas are stacked over it (the lower is then their stack), else at the lower. */
function baseMountPoint(restoreId: string, layers: Layer[]): string {
  const where = sandboxPaths.overlay(restoreId);
  return layers.length > 1 ? where.chainImage : where.lower;
}

/**
 * A file-level base's tree served at `at`: files-mount fetches the index (checked against the record's SHA-256, kept
 * at where.image for a compaction's backup), each chunk fetched by a Range GET of its pack on first read and checked
 * against its SHA-256. A compaction's wake
 * reads only the names its layers changed (filecas lower.go): no prefetch, and nothing to wait for.
 */
async function startFilesMount(c: RestoreContext, base: Layer, at: string, clear?: { unmount: string[]; remove: string[] }) {
  // (A probe from before packKeys: the record read again.)
  const [keys, indexUrl, chain] = await Promise.all([base.packKeys ?? filesSnapshot(c, base.id).then(packKeysOf), c.d.presigner.url(base.archive.key, "GET"), signedChain(c.d.presigner, base.chain)]);
  const index = { file: sandboxPaths.overlay(c.p.restoreId).image, sha256: base.archive.sha256, url: indexUrl, ...chain };
  try {
    return await c.agent.filesMount({ index, urls: signedPacks(c, keys), mountpoint: at, work: sandboxPaths.lazy(c.p.restoreId).work, prefetch: c.p.compactor ? 0 : PREFETCH, ...(clear ? { clear } : {}) });
  } catch (e) {
    // The index the store gave is not the one the record vouches for: fetch again (a retry), as for any archive.
    if (e instanceof AgentCallError && e.code === "verify_failed" && e.field === "index") throw new SnapflowError("transfer_damaged", `the index of ${base.id} arrived damaged: ${e.message}`);
    throw e;
  }
}

/**
 * A mount point cannot be renamed: the overlay is taken down beside the target (its lower and upper stay) and laid
 * again at the target over the same layers. Over a lazy base it was never beside the target: an empty directory is
 * swapped in for it. Either way the agent's swap lays the overlay at the target in the same call, and answers a
 * retry's overlay, already there, as made; a lower whose mount went (an agent restart) is a 404 naming it.
 */
async function swapInOverlay(c: RestoreContext, probed: RestoreProbeResult, clear?: { unmount: string[]; remove: string[] }): ReturnType<RestorePlan["swapIn"]> {
  const { p, agent } = c;
  const where = sandboxPaths.overlay(p.restoreId);
  if (!isLazy(probed.layers[0]!)) await agent.unmount(probed.swap.staged).catch(() => {});
  return agent.swapIn(p.path, p.restoreId, { mount: { kind: "overlay", lower: where.lower, upper: where.upper, how: "kernel" }, ...(clear ? { clear } : {}) });
}

/** Is this restore's overlay (over its own lower) mounted at the target? */
async function ownOverlayAt({ p, agent }: RestoreContext): Promise<boolean> {
  const lower = sandboxPaths.overlay(p.restoreId).lower;
  return (await agent.mounts()).mounts.some((m) => m.path === p.path && m.kind === "overlay" && m.source === lower);
}
