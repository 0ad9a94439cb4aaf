// files: the file-level content-addressed format (issue 24; native/lazy/internal/filecas). The native engine
// (`snapflow-lazy files-pack`, run by the agent's POST /v1/files/pack) walks the tree once: a file unchanged since the
// parent snapshot (size, ns mtime, ctime, inode, device) keeps its chunk list from the parent's index unread; a changed
// one is read once, hashed, cut into FastCDC chunks, and the chunks no snapshot of its lineage had are compressed into
// one pack, PUT in parts to presigned UploadPart URLs as it fills (the default backup's way: no byte through the
// agent or the Worker). The snapshot's own object is the index (zstd MessagePack), PUT by the sandbox bound to its
// SHA-256. Its manifest is not stored: the index holds every entry of it, and a reader has the engine make it again
// (container/manifest/manifest-from-index.ts), byte for byte what this backup's pass wrote, checked against the
// SHA-256 the record keeps. Nothing of the parent is copied: a snapshot is its index, and names the packs it needs.
//
//   parent     the snapshot named by baseSnapshotId, else this sandbox's latest file-level snapshot of the same path
//              and tenant (restic's parent). Its index: the copy the sandbox kept, if its SHA-256 is the record's,
//              else a presigned GET of the stored one.
//   packs      the engine reports every pack the index names; the Worker accepts only this backup's own and those
//              its parent's record lists (a sandbox cannot reach another lineage's packs by naming them), and verify
//              HEADs each of them.
//   no change  no new chunk: no pack; the multipart upload is aborted, the index alone is stored.
//   layer      over a parent whose index is under file-indexes/ (pack-keys.ts), the engine stores only what changed,
//              as a layer over the parent's index (filecas layer.go): ~0.1 MB instead of the whole 2.9 MB index of
//              the npm workspace. The record lists the chain its index needs (files.chain, whole index first,
//              the parent's last), which readers fetch with it and the collector keeps. Over a parent
//              FILES_MAX_DEPTH layers deep the layer lies over the chain's whole index instead (holding what every
//              layer between changed), unless those layers together outgrow a quarter of it: then, as for a
//              compaction, a whole index.
//   a wake     a tree woken by files-overlay-restore and still laid there: only the names the wake's layers hold
//              are walked and read (wakeBase, filecas lower.go), so a sleep costs what changed since the wake.
import { FILES_MAX_DEPTH, type FilesFormat, type FilesPackResult } from "../../../container/contract/protocol.ts";
import { INDEX_PREFIX, nameOfKey, packKey } from "../../chunks/pack-keys.ts";
import { signedChain } from "../../snapshots/index-chain.ts";
import { SnapflowError } from "../../errors.ts";
import { since } from "../../phases/phase-runner.ts";
import { AgentCallError, type AgentClient } from "../../sandbox/agent-client.ts";
import { sandboxPaths } from "../../sandbox/sandbox-paths.ts";
import { snapshotRecordKey, type FilesRecord } from "../../snapshots/records.ts";
import { DEFAULT_TENANT } from "../../snapshots/tenant.ts";
import type { BackupStrategy } from "../../strategies/registry.ts";
import { compactionIds } from "../../compaction/compaction-params.ts";
import { filesParent, type FilesParent } from "../files-parent.ts";
import { selectionOf } from "../selection.ts";
import { checkManifestBounds } from "../manifest-bounds.ts";
import type { BackupParams } from "../backup-params.ts";
import type { BackupTransfer } from "./backup-transfer.ts";
import { boundFrom, sendInParts } from "./part-urls.ts";

export function filesOnly(s: BackupStrategy): FilesFormat {
  if (s.format.kind !== "files") throw new SnapflowError("bad_request", `${s.name}: the files path needs the file-level format`, { field: "strategy" });
  return s.format;
}

/**
 * A compaction of a file-level chain (workflows/compact-workflow.ts): the tree is its wake's overlay, the parent's
 * index served by files-mount under each delta's layer directory and the (empty) upper. The engine walks only the
 * directories those hold and reads only the names they hold (the rest is the base's index as it is: filecas
 * lower.go); the index is the one the wake brought (where.image), checked against the same SHA-256.
 */
function compactorBase(p: BackupParams): { file: string; layers: string[] } | undefined {
  if (!p.compacts || p.compactLayers === undefined) return undefined;
  const restoreId = compactionIds(p.compacts).restoreId;
  return { file: sandboxPaths.overlay(restoreId).image, layers: wakeLayers(restoreId, p.compactLayers) };
}

/** A wake's layer directories over its base, lowest first: each overlay delta it laid, then its upper. */
function wakeLayers(restoreId: string, deltas: number): string[] {
  const where = sandboxPaths.overlay(restoreId);
  return [...Array.from({ length: deltas }, (_, i) => where.chainLayer(i + 1)), where.upper];
}

/**
 * A wake's overlay (files-overlay-restore, named by the lineage: files-parent.ts): the parent's tree — files-mount
 * serving its index, each overlay delta the wake laid extracted over it — under the wake's upper, where every write
 * since lands. So, as for a compaction, the engine reads only the names those layers hold and writes a layer of the
 * parent's index: a sleep costs what changed since the wake. Only while that overlay is still at the path (the agent's
 * mount table: an overlay over this restore's own lower); else the whole tree is walked, as for any tree. What the
 * sandbox answers here can only misdescribe its own tree: the packs it may name are still only its parent's.
 */
async function wakeBase(agent: AgentClient, p: BackupParams, parent: FilesParent | undefined): Promise<{ file: string; layers: string[]; restoreId: string } | undefined> {
  const wake = parent?.wake;
  if (!wake || p.compacts) return undefined;
  const where = sandboxPaths.overlay(wake.restoreId);
  const laid = (await agent.mounts()).mounts.some((m) => m.path === p.path && m.kind === "overlay" && m.source === where.lower);
  if (!laid) return undefined;
  // The wake kept the index it mounted (where.image); a backup since keeps its own (indexOut).
  const file = wake.by === "restore" ? where.image : sandboxPaths.filesIndex(parent!.id);
  return { file, layers: wakeLayers(wake.restoreId, wake.deltas), restoreId: wake.restoreId };
}

/** The sandbox's kept copy of a chain's index object, named by the snapshot that wrote it (files-pack's indexOut). */
function keptCopy(key: string): { file?: string } {
  const named = nameOfKey(INDEX_PREFIX, key);
  return named ? { file: sandboxPaths.filesIndex(named.name) } : {};
}

export const filesTransfer: BackupTransfer = {
  streamsArchive: true,
  singlePass: true,
  // The index is small: verify reads it back and hashes it (the sandbox made it).
  hashedByWorker: false,
  async transfer({ d, p, s, agent, key, started }) {
    const format = filesOnly(s);
    const tenant = p.tenant ?? DEFAULT_TENANT;
    const pack = packKey(tenant, p.snapshotId);
    // The pack's upload is opened while the parent is looked up (each a store round trip). Should the lookup fail,
    // it is aborted here (and by the step's cleanup otherwise: withUploadRecords records it).
    const opened = d.presigner.createMultipartUpload(pack);
    const parentStarted = performance.now();
    const looked = await Promise.all([filesParent(d, p).then(async (parent) => ({ parent, overWake: await wakeBase(agent, p, parent) })), opened]).catch(async (e) => {
      await opened.then((u) => u.abort(), () => {}).catch(() => {});
      throw e;
    });
    const { parent, overWake } = looked[0];
    const parentMs = since(parentStarted);
    // Compressed chunks are never much larger than the files they come from: the tar bound covers them. With a
    // parent, its tree's totals give that bound, grown by a quarter, without the metadata walk a count takes (~0.1 s
    // of the engine's for 31.7k entries); a tree that grew past it stops before the extra part (400 naming urls) and
    // is counted then, below.
    const bound = parent ? { ...boundFrom(parent.totals), ms: 0, by: "parent" as "parent" | "native" | "node" } : await agent.treeSize(p.path);
    const indexOut = sandboxPaths.filesIndex(p.snapshotId);
    const selection = selectionOf(p);
    // The parent's index as kept here, else the store's; and, when this tree was restored from it here, the restored
    // tree's stat keys (the engine takes them only if they belong to that index).
    const base = parent ? {
      url: await d.presigner.url(parent.key, "GET"), sha256: parent.indexSha256, stat: sandboxPaths.filesStats(parent.id),
      ...(compactorBase(p) ?? (overWake ? { file: overWake.file, layers: overWake.layers } : { file: sandboxPaths.filesIndex(parent.id) })),
      ...(parent.chain.length ? { chain: (await signedChain(d.presigner, parent.chain)).chain!.map((o, i) => ({ ...o, ...keptCopy(parent.chain[i]!.key) })) } : {}),
    } : undefined;
    // A layer only over an index that outlives its snapshot (a parent recorded before file-indexes/ keeps its own).
    // A compaction (compactorBase) flattens its chain: a whole index.
    const layer = !!parent && nameOfKey(INDEX_PREFIX, parent.key) !== null && !compactorBase(p);
    // A parent the engine cannot use (its kept index and the store's both unusable: 400 naming base) is dropped:
    // nothing was PUT, and the backup reads every file instead.
    let baseDropped: string | undefined;
    // What the pass answered is checked, and its index stored, while the pack's upload is completed (alongside).
    let chain: { key: string; sha256: string }[] = [];
    let storeMs = 0;
    const storeIndex = async (up: FilesPackResult) => {
      // A layer lies over its parent's index, one deeper than the parent's own chain; over a parent FILES_MAX_DEPTH
      // deep, over the whole index at the chain's foot (depth 1: filecas rebaseOver). Nothing else is a chain the
      // record can vouch for.
      const over = layer && parent && !baseDropped ? parent : undefined;
      const depths = over ? (over.chain.length >= FILES_MAX_DEPTH ? [1, 0] : [over.chain.length + 1, 0]) : [0];
      if (!depths.includes(up.depth)) throw new SnapflowError("transfer_damaged", `the engine reports an index at depth ${up.depth}; over ${baseDropped || !parent ? "no base" : `its parent ${parent.id} (depth ${parent.chain.length})`} it can only be at depth ${depths.join(" or ")}`);
      chain = up.depth === 0 || !over ? [] : over.chain.length >= FILES_MAX_DEPTH ? [over.chain[0]!] : [...over.chain, { key: over.key, sha256: over.indexSha256 }];
      // The manifest's bounds hold as if it were stored (a reader makes it whole); the index goes from the sandbox to
      // the store bound to its SHA-256 (the store refuses other bytes). The pass writes no manifest file: it answers
      // the manifest's size and SHA-256, which the record keeps.
      checkManifestBounds(d.config, p, { bytes: up.jsonBytes, entries: up.entries });
      const storeStarted = performance.now();
      await agent.uploadToUrl({ path: indexOut, url: await d.presigner.url(key, "PUT", { sha256: up.index.sha256, expiresSeconds: 60 + Math.ceil(up.index.bytes / 8e6) }) }, up.index.bytes);
      storeMs = since(storeStarted);
    };
    const { sent: up, sized, urls, attempts, storeChecksum } = await sendInParts(d, p, pack, bound, () => agent.treeSize(p.path), async (urls, partSize, tarMax) => {
      const body = {
        path: p.path, indexOut, name: p.snapshotId, avgChunk: format.avgChunk, ...(format.level ? { level: format.level } : {}),
        ...(selection ? { selection } : {}), urls, partSize, concurrency: p.tuning?.concurrency ?? 4,
      };
      const up = await agent.filesPack({ ...body, ...(base ? { base, layer, statsOut: sandboxPaths.filesStats(p.snapshotId) } : {}) }, tarMax).catch((e) => {
        if (!(base && e instanceof AgentCallError && e.status === 400 && e.field === "base")) throw e;
        baseDropped = e.message;
        return agent.filesPack(body, tarMax);
      });
      // Before the pack is completed: the packs the index names are this backup's own and only those its parent's
      // record lists, and its own is the one whose parts were sent.
      const allowed = new Set([p.snapshotId, ...(parent && !baseDropped ? parent.packs.map((x) => x.name) : [])]);
      const foreign = up.packs.find((x) => !allowed.has(x.name));
      if (foreign) throw new SnapflowError("transfer_damaged", `the index names pack ${foreign.name}, which is neither this backup's nor one its parent ${parent?.id ?? "(none)"} names`);
      const own = up.packs.find((x) => x.name === p.snapshotId);
      if (!!own !== up.parts.length > 0 || (own && own.bytes !== up.pack?.bytes)) throw new SnapflowError("transfer_damaged", `the engine uploaded ${up.parts.length} parts, and its index ${own ? `names a pack of ${own.bytes} bytes` : "names no pack"} of this backup's`);
      return up;
    }, { opened, alongside: storeIndex });
    const manifest = {
      ...up.totals, manifestBytes: up.jsonBytes, ms: up.walkMs, storeMs, sha256: up.jsonSha256,
      fromIndex: { key, sha256: up.index.sha256, ...(chain.length ? { chain } : {}), ...(up.selection ? { selection: up.selection } : {}) },
    };
    const files: FilesRecord = {
      ...(parent ? { parent: parent.id } : {}), ...(chain.length ? { chain } : {}), packs: up.packs,
      ...(up.pack ? { pack: { ...up.pack, ...(storeChecksum ? { storeChecksum } : {}) } } : {}),
      chunks: up.index.chunks, newChunks: up.newChunks, newBytes: up.newBytes, read: up.read, reused: up.reused,
    };
    return {
      ms: since(started), bytes: up.index.bytes, sha256: up.index.sha256, parts: up.parts.length, urls, attempts, sizeBy: sized.by, tarMax: sized.tarMax,
      parentMs, engineMs: up.ms, walkMs: up.walkMs, engineAt: { baseMs: up.baseMs, readMs: up.readMs, storedMs: up.storedMs }, ...(up.peakBufferedBytes ? { agentPeakBufferedBytes: up.peakBufferedBytes } : {}), ...(baseDropped ? { baseDropped } : {}),
      ...(overWake && !baseDropped ? { overWake: { restoreId: overWake.restoreId, deltas: overWake.layers.length - 1 } } : {}),
      files, manifest,
    };
  },

  // Every pack the index names is in the store at the size the engine reported, and every index object of its chain;
  // the new pack also with the SHA-256 checksum its parts make (the store checked each part at completion).
  //
  // The packs it shares with its parent are the parent's (transfer checked that before completing the pack): its
  // record names them, so while it exists the pack collector keeps them (pack-gc.ts), and the parent's own verify
  // found each in the store. One look at that record then stands for all of them, and only this backup's own pack is
  // looked at itself; a parent gone meanwhile has each looked at. (A HEAD per pack grew with the lineage: one pack
  // per sleep, 100 HEADs at the hundredth, and a Workers invocation may make 1,000 calls to R2 and KV in all.)
  async verifyStored({ d, p, sent }) {
    const files = sent.files;
    if (!files) throw new SnapflowError("transfer_damaged", `the file-level backup ${p.snapshotId} reported no packs`);
    const tenant = p.tenant ?? DEFAULT_TENANT;
    const chain = files.chain ?? [];
    const inherited = files.packs.filter((x) => x.name !== p.snapshotId);
    const headPacks = (packs: typeof files.packs) => Promise.all(packs.map(async (x) => ({ x, head: await d.store.head(packKey(tenant, x.name)) })));
    const [parentKept, ownHeads, chainHeads] = await Promise.all([
      files.parent && inherited.length ? d.store.head(snapshotRecordKey(files.parent)) : null,
      headPacks(files.packs.filter((x) => x.name === p.snapshotId)),
      Promise.all(chain.map(async (o) => ({ key: o.key, head: await d.store.head(o.key) }))),
    ]);
    const heads = parentKept || !inherited.length ? ownHeads : [...ownHeads, ...(await headPacks(inherited))];
    const bad = heads.filter(({ x, head }) => head?.size !== x.bytes);
    if (bad.length) {
      throw new SnapflowError("snapshot_unusable", `${bad.length} of the ${files.packs.length} packs the index names are not in the store at their size, first: ${bad.slice(0, 3).map(({ x, head }) => `${x.name} (${head ? `${head.size} bytes, not ${x.bytes}` : "missing"})`).join(", ")}`);
    }
    // A layer's chain: each object beneath it is still there (a parent deleted and collected during this backup would
    // leave a record no restore could read).
    const gone = chainHeads.filter(({ head }) => !head);
    if (gone.length) throw new SnapflowError("snapshot_unusable", `the index is a layer over ${gone.map((g) => g.key).join(", ")}, no longer in the store`);
    if (files.pack?.storeChecksum) {
      const kept = await d.presigner.storedChecksum(packKey(tenant, files.pack.name));
      if (kept !== null && kept !== files.pack.storeChecksum) throw new SnapflowError("snapshot_unusable", `pack ${files.pack.name}: the store keeps SHA-256 checksum ${kept}, its parts make ${files.pack.storeChecksum}`);
    }
    return { packsChecked: heads.length, ...(parentKept && inherited.length ? { packsByParent: inherited.length } : {}), ...(chain.length ? { chainChecked: chain.length } : {}) };
  },
};
