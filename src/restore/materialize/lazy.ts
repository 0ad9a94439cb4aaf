// lazy / lazy-overlay: a chunked snapshot mounted before it is downloaded. The transfer step brought only the index
// (hash-checked against the snapshot record); here the Worker signs GETs for the chunks the mount reads (splitForMount)
// and the agent starts snapflow-lazy's FUSE file over the index (for lazy-overlay, the image mounted from it
// read-only at the lower directory): the helper serves (`servingMs`).
//
// The same step then swaps an empty directory in at the target and the agent's swap makes the tree there, in the
// same call, once, over the running helper: the image mounted read-only (kernel squashfs, or squashfuse), or the
// writable overlay over the lower with its upper on local disk. From the restore request to that moment is `usableMs`. Every byte the mount serves is a
// chunk checked against its SHA-256, and the image was built from the same tar stream its manifest was hashed from
// (image-with-manifest.ts): the metadata walk can wait until the tree is at the target. Verify hands the helper the other
// chunks' URLs, checks the tree at the target (a metadata walk through the mount: the reads it makes fetch what
// they need) and waits until every chunk is local and verified (`completeMs`) or the prefetcher gave up on a chunk;
// either failure fails the restore naming the chunk, and the swap is rolled back. Presigned URLs are the only
// credential the sandbox gets, one per chunk, as long-lived as the presigner allows (PRESIGN_EXPIRY_SECONDS): once
// the image is complete, reads never reach the network.
import { SnapflowError } from "../../errors.ts";
import { AgentCallError } from "../../sandbox/agent-client.ts";
import type { ChunkIndex, SquashfsFormat } from "../../../container/contract/protocol.ts";
import { distinctChunks, readIndex } from "../../chunks/chunk-index.ts";
import { chunkKey } from "../../chunks/chunk-keys.ts";
import { tenantOf } from "../../snapshots/tenant.ts";
import { since } from "../../phases/phase-runner.ts";
import { sandboxPaths } from "../../sandbox/sandbox-paths.ts";
import { readSnapshot, type SnapshotRecord } from "../../snapshots/records.ts";
import { splitForMount } from "../../chunks/mount-set.ts";
import { formatName } from "../../strategies/registry.ts";
import type { StepResult } from "../../snapshots/records.ts";
import type { RestoreContext } from "../restore-context.ts";
import { unusableChunks, walkThenComplete } from "./lazy-completion.ts";
import type { Materialization } from "./materialization.ts";

/**
 * Background fetches at once. On loopback 4 to 32 complete alike (the CPU is the limit); a store 30 ms away needs
 * many in flight: the npm image completed in 2.37 s with 4, 0.68 s with 32, against 0.32 s to download and mount it
 * (native/lazy/MEASUREMENTS.md, bench/latency.py). R2 is further from a sandbox than loopback.
 */
export const PREFETCH = 32;

/** Milliseconds from the restore request (the API's startedAt) to now, when the request time is known. */
const sinceRequest = (c: RestoreContext, at = Date.now()) => (c.p.startedAt ? at - Date.parse(c.p.startedAt) : undefined);

async function snapshotRecord(c: RestoreContext, snapshotId: string): Promise<SnapshotRecord> {
  const record = await readSnapshot(c.d.store, c.d.kv, snapshotId);
  if (!record) throw new SnapflowError("snapshot_unusable", `snapshot ${snapshotId} was deleted during its restore`);
  return record;
}

const indexOf = (c: RestoreContext, record: Pick<SnapshotRecord, "archive">): Promise<ChunkIndex> => readIndex(c.d.store, record.archive.key, record.archive.sha256, { recorded: true });

/** GET URLs for `record`'s chunks: under the snapshot's own tenant, whoever asks (the API checked the asker is it). */
function signed(c: RestoreContext, record: Pick<SnapshotRecord, "tenant">, digests: readonly string[]): Record<string, string> {
  const tenant = tenantOf(record);
  const urls = c.d.presigner.gets(digests.map((sha) => chunkKey(tenant, sha)));
  return Object.fromEntries(digests.map((sha, i) => [sha, urls[i]!]));
}

const beforeMount = (c: RestoreContext) => ({ headChunks: c.d.config.LAZY_HEAD_CHUNKS, tailBytes: c.d.config.LAZY_TAIL_BYTES });
/** URLs per later delivery to the agent. */
const URL_BATCH = 4096;

/**
 * The URLs a lazy mount of `snapshotId`'s image starts with, and whether more are to come (afterLazySwap). A record
 * that lists them (`chunks.mountFirst`, from its backup) spares reading the index: the time to usable then no
 * longer grows with the image; an older record's are found in its index.
 */
export async function urlsBeforeMount(c: RestoreContext, snapshotId: string): Promise<{ urls: Record<string, string>; moreUrls: boolean; first: number; chunks: number; imageBytes: number }> {
  // The probe's result carries what the record lists (a store read fewer on the way to usable); else it is read.
  const record = c.probed?.id === snapshotId && c.probed.chunks?.mountFirst ? c.probed : await snapshotRecord(c, snapshotId);
  const listed = record.chunks?.mountFirst;
  if (listed && record.chunks) return { urls: signed(c, record, listed), moreUrls: record.chunks.distinct > listed.length, first: listed.length, chunks: record.chunks.distinct, imageBytes: record.chunks.imageBytes };
  const index = await indexOf(c, record);
  const { first, rest } = splitForMount(index, beforeMount(c));
  return { urls: signed(c, record, first), moreUrls: rest.length > 0, first: first.length, chunks: first.length + rest.length, imageBytes: index.size };
}

/**
 * The start of every tree over a lazy mount (the lazy materializations, and a fork's lazy base): the first URLs are
 * signed (in the Worker) while `clear` takes down what an earlier attempt left (in the agent) — neither waits for the
 * other — then the agent starts snapflow-lazy over the staged `index` and, given `lower`, mounts the image there.
 * `clear` given as the paths (`{ paths, otherwise }`) is done by the agent first in the mount's own call, a round trip
 * fewer; if that clear fails, `otherwise` clears the hard way and the mount is asked again without one.
 */
export async function startLazyMount(c: RestoreContext, o: { snapshotId: string; index: string; format: SquashfsFormat; lower?: string; clear: Promise<unknown> | FoldedClear }) {
  const t = performance.now();
  const folded = o.clear instanceof Promise ? undefined : o.clear;
  const [signed] = await Promise.all([urlsBeforeMount(c, o.snapshotId).then((s) => ({ ...s, ms: since(t) })), folded ? undefined : o.clear]);
  const clearMs = since(t);
  const where = sandboxPaths.lazy(c.p.restoreId);
  const mount = (clear?: FoldedClear["paths"]) =>
    c.agent.lazyMount({ index: o.index, urls: signed.urls, moreUrls: signed.moreUrls, work: where.work, cache: where.cache, ...(o.lower ? { path: o.lower } : {}), format: o.format, prefetch: PREFETCH, ...(clear ? { clear } : {}) });
  const mounted = await mount(folded?.paths)
    .catch(async (e) => {
      if (!folded || !(e instanceof AgentCallError && e.field?.startsWith("clear."))) throw e;
      await folded.otherwise();
      return mount();
    })
    .catch(async (e) => {
      throw await mountFailure(c, e);
    });
  return { signed, clearMs, mounted };
}

/** A clear done in the mount's own call: these paths, or when that fails, `otherwise` (a clear that works path by path). */
export interface FoldedClear {
  paths: { unmount: string[]; remove: string[] };
  otherwise: () => Promise<unknown>;
}

/**
 * An image mount over the helper that failed (materialize's, or the swap's at the target): for a chunk it could not
 * have (the superblock's, the tables'), the helper's status — which outlives it until undo — names the chunks, and
 * the error then names the snapshots that share them too; any other failure as it was.
 */
export async function mountFailure(c: RestoreContext, e: unknown): Promise<unknown> {
  const status = await c.agent.lazyWait({ work: sandboxPaths.lazy(c.p.restoreId).work, timeoutMs: 0 }).catch(() => null);
  return status?.failed.length ? unusableChunks(c, "the image could not be mounted because its chunks could not be had", status, e) : e;
}

/**
 * What the materialize step of a tree over a lazy mount (the lazy materializations, and a fork's lazy base) reports
 * once it swapped the tree in at the target: usable now (`usableMs`: the restore request → now). Verify sees
 * `swappedIn` and goes straight to the walk at the target and the wait for every chunk (afterLazySwap).
 */
export function usableNow(c: RestoreContext, swapped: { ms: number; remounted?: string; mountAtMs?: number }) {
  const usableMs = sinceRequest(c);
  return { swappedIn: true as const, swapMs: swapped.ms, ...(swapped.remounted ? { remounted: swapped.remounted } : {}), ...(swapped.mountAtMs !== undefined ? { mountAtMs: swapped.mountAtMs } : {}), ...(usableMs !== undefined ? { usableMs } : {}) };
}

/**
 * After the swap of a tree over a lazy mount: the URLs the mount started without, the walk at the target and the
 * wait until every chunk is local.
 */
export async function afterLazySwap(c: RestoreContext, snapshotId: string, check: (path: string) => Promise<StepResult>) {
  const work = sandboxPaths.lazy(c.p.restoreId).work;
  const delivered = await deliverRemainingUrls(c, work, snapshotId);
  const done = await walkThenComplete(c, work, check);
  return { ...done, urlsAfterUsable: delivered.urls, urlsAfterUsableMs: delivered.ms };
}

/** The URLs the mount started without (urlsBeforeMount's), in batches; the last batch tells the helper that no more are coming. */
async function deliverRemainingUrls(c: RestoreContext, work: string, snapshotId: string): Promise<{ ms: number; urls: number }> {
  const t = performance.now();
  const record = await snapshotRecord(c, snapshotId);
  const index = await indexOf(c, record);
  const sent = new Set(record.chunks?.mountFirst ?? splitForMount(index, beforeMount(c)).first);
  const rest = distinctChunks(index).map((ch) => ch.sha256).filter((sha) => !sent.has(sha));
  for (let at = 0; at === 0 || at < rest.length; at += URL_BATCH) {
    const batch = rest.slice(at, at + URL_BATCH);
    await c.agent.lazyUrls({ work, urls: signed(c, record, batch), last: at + URL_BATCH >= rest.length });
  }
  return { ms: since(t), urls: rest.length };
}

export const lazyMaterialization = (overlay: boolean): Materialization => ({
  mounts: true,
  keeps: "tree", // its chunk cache grows to the image's size; counted as the tree's footprint, as before
  // The image as stored (lazy-overlay: under a fresh empty upper), every chunk checked before it is read: not walked
  // once its content was checked (a walk of the npm workspace's 31.7k entries took ~1 s of the 1.3 s to complete).
  servesImage: true,
  // The tree is made once, at the target, by the swap: materialize starts the FUSE file (and, for lazy-overlay, mounts
  // the image at the lower) and leaves the staged place empty; the agent's swap mounts the image (or lays the overlay)
  // at the target over what runs, in the same call. Mounting beside the target first and again at it cost an image
  // mount, an unmount and their round trips before the tree answered where the user looks.
  atTarget: {
    mount({ p }, format) {
      const where = sandboxPaths.lazy(p.restoreId);
      if (format.kind !== "squashfs") throw new SnapflowError("snapshot_unusable", `${formatName(format)} is not a chunked image`);
      return overlay ? { kind: "overlay", lower: where.lower, upper: `${where.layer}/upper`, how: "kernel" } : { kind: "lazy-image", work: where.work, format };
    },
    failed: mountFailure,
  },
  async materialize(c, staged, format, _expected, dir) {
    const t = performance.now();
    const { p } = c;
    if (format.kind !== "squashfs" || !format.chunks) throw new SnapflowError("snapshot_unusable", `${formatName(format)} is not a chunked image; restore it with a strategy that reads it`, { field: "strategy" });
    // lazy-overlay's lower is the image (its fresh upper was cleared with the rest by undo); plain lazy mounts nothing yet.
    const lower = overlay ? sandboxPaths.lazy(p.restoreId).lower : undefined;
    // What an earlier attempt left goes first, in the mount's own call.
    const { signed, clearMs, mounted } = await startLazyMount(c, { snapshotId: p.snapshotId, index: staged, format, ...(lower ? { lower } : {}), clear: { paths: lazyLeftovers(c, dir, overlay), otherwise: () => undoLazy(c, dir, overlay) } });
    const presignMs = signed.ms;
    const ms = since(t);
    return {
      ms, bytes: 0, how: overlay ? "lazy-overlay" : "lazy", ...(mounted.how ? { imageMount: mounted.how } : {}),
      // The helper serving (and lazy-overlay's lower mounted): the restore request → now, and this part's own time.
      // The archive plan then swaps the tree in at the target (usableNow).
      servingMs: sinceRequest(c), servingAfterStepMs: ms,
      clearMs, presignMs, fuseMs: mounted.fuseMs, helperReadyMs: mounted.readyMs, ...(mounted.how ? { imageMountMs: mounted.mountMs } : {}),
      imageBytes: signed.imageBytes, chunks: signed.chunks, urlsBeforeMount: signed.first, chunksCachedAtStart: mounted.local,
    };
  },

  undo: (c, dir) => undoLazy(c, dir, overlay),

  async afterSwap(c, check) {
    return afterLazySwap(c, c.p.snapshotId, check);
  },
});

/** What a lazy tree (image or overlay) at `dir` may have left: its mounts (the tree, then the FUSE file) and its files. */
function lazyLeftovers({ p }: RestoreContext, dir: string, overlay: boolean) {
  const where = sandboxPaths.lazy(p.restoreId);
  return { unmount: [dir, `${where.work}/fuse`], remove: [where.work, where.lower, ...(overlay ? [where.layer] : [])] };
}

/**
 * Takes down a lazy tree (image or overlay) at `dir`, then the FUSE file with whatever still stands on it (unmounting it
 * stops its helper), then the files: in one call when nothing resists, path by path when something does, so that one
 * mount that will not go keeps nothing else behind.
 */
async function undoLazy(c: RestoreContext, dir: string, overlay: boolean): Promise<void> {
  const { agent } = c;
  const { unmount, remove } = lazyLeftovers(c, dir, overlay);
  await agent.clear({ unmount, remove }).catch(async () => {
    for (const path of unmount) await agent.unmount(path).catch(() => {});
    for (const path of remove) await agent.deleteFile(path).catch(() => {});
  });
}
