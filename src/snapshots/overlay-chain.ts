// Chains of overlay deltas: a workspace slept and woken again. A wake of an overlay delta lays its chain read-only —
// the image (its base), then each delta in the order they were taken — under a fresh, empty upper, so the next
// sleep's delta holds only what changed since that wake, and records the snapshot it was woken from as its parent
// (`delta.base`) and everything below as `delta.chain` (an image first, ending with the parent — or, when the parent
// has a compaction, that compaction alone). Deltas from before chains have no `chain`: they lay over their image
// alone (`[base]`).
//
// Compaction (compactions.ts): a chain resolves through the newest compaction on it — a delta whose recorded chain
// is [image, d1 … dk] with a compaction C of dk wakes as [C, the delta]; C is dk's tree exactly, so the delta's
// upper (whiteouts and opaque directories included) applies over it as over dk's stack. The links below dk are then
// not read, and need not exist. MAX_OVERLAY_CHAIN counts the deltas after the image or compaction the chain resolves
// to, so a chain that is compacted never stops.
//
// A chain is read whole (its records fetched at once, not link by link) and every link is checked before anything
// is laid: it exists, belongs to the same tenant, is an overlay delta whose parent is the link before it (or the
// link before it compacts its parent; the first link: a squashfs image or a file-level snapshot, not a delta), and the chain is at most
// MAX_OVERLAY_CHAIN deltas deep. Deleting a link is refused while a later delta needs it (each delta marks itself on
// its parent: dependants.ts; a compacted link is needed by none).
import { z } from "zod";
import { MAX_OVERLAY_CHAIN } from "../../container/contract/protocol.ts";
import { SnapflowError } from "../errors.ts";
import type { ObjectStore } from "../store/object-store.ts";
import { compactionOf, compactsOf } from "./compactions.ts";
import { readSnapshot, type SnapshotRecord } from "./records.ts";
import { tenantOf } from "./tenant.ts";

export { MAX_OVERLAY_CHAIN };

const SnapshotId = z.string().regex(/^[a-z]{2}-\d{14}-[0-9a-f]{8}$/, "a snapshot id");

/** What a chain can lie over: a squashfs image (whole or chunked), or a file-level snapshot (served by files-mount). */
export const isChainBase = (format: SnapshotRecord["format"]): boolean => format.kind === "squashfs" || format.kind === "files";

/** An overlay delta's link, as its record keeps it (the store's JSON is parsed, not cast). */
const OverlayLink = z.looseObject({
  kind: z.literal("overlay-upper"),
  base: SnapshotId,
  chain: z.array(SnapshotId).min(1).max(MAX_OVERLAY_CHAIN).optional(),
});

/** What an overlay delta recorded it lays over: an image first, ending with its parent (or its parent's compaction alone). */
export function chainOf(record: Pick<SnapshotRecord, "id" | "delta">): string[] {
  const link = OverlayLink.safeParse(record.delta);
  if (!link.success) throw new SnapflowError("snapshot_unusable", `snapshot ${record.id}'s record has no valid overlay delta link (${link.error.issues[0]!.path.join(".")}: ${link.error.issues[0]!.message})`);
  const chain = link.data.chain ?? [link.data.base];
  // Not ending with the parent: the parent's compaction, alone (readOverlayChain checks it is one).
  if (chain.at(-1) !== link.data.base && chain.length !== 1) throw new SnapflowError("snapshot_unusable", `snapshot ${record.id}'s chain ends with ${chain.at(-1)}, not its parent ${link.data.base}`);
  if (new Set([...chain, record.id]).size !== chain.length + 1) throw new SnapflowError("snapshot_unusable", `snapshot ${record.id}'s chain names a snapshot twice`);
  return chain;
}

export interface OverlayChain {
  /** the base at the bottom (a squashfs image, or a file-level snapshot): the chain's own, or the newest compaction on it */
  image: SnapshotRecord;
  /** the overlay deltas over it, oldest first, ending with the snapshot asked for (none: it is the image) */
  deltas: SnapshotRecord[];
  /** the chain resolves through a compaction (`image` is it): the links it skipped */
  skipped?: number;
}

/** Does `child` lay over `below` — its parent, or a compaction of its parent? */
const laysOver = (child: SnapshotRecord, below: SnapshotRecord) => child.delta?.base === below.id || (!!child.delta && compactsOf(below) === child.delta.base);

/**
 * The chain `snapshot` lays over, resolved through the newest compaction on it, every link read and checked (see
 * the top of this file). An image is a chain of its own. A broken chain is `snapshot_unusable`, naming the link.
 */
export async function readOverlayChain(d: { store: ObjectStore; kv: KVNamespace }, snapshot: SnapshotRecord): Promise<OverlayChain> {
  if (snapshot.delta?.kind !== "overlay-upper") return { image: snapshot, deltas: [] };
  const recorded = chainOf(snapshot);
  const tenant = tenantOf(snapshot);
  // The first link is an image (the chain's, or a compaction already): the deltas after it may have compactions.
  const compactions = await Promise.all(recorded.map((id, i) => (i === 0 ? null : compactionOf(d, id, tenant))));
  const at = compactions.findLastIndex((c) => c !== null);
  const ids = at < 0 ? recorded : [compactions[at]!.id, ...recorded.slice(at + 1)];
  const records = await Promise.all(ids.map((id, i) => (i === 0 && at >= 0 ? compactions[at] : readSnapshot(d.store, d.kv, id))));
  records.forEach((r, i) => {
    const id = ids[i]!;
    const what = `overlay delta ${snapshot.id} lays over ${id}`;
    if (!r) throw new SnapflowError("snapshot_unusable", `${what}, which does not exist any more`);
    if (tenantOf(r) !== tenant) throw new SnapflowError("snapshot_unusable", `${what}, another tenant's snapshot`);
    if (i === 0) {
      if (r.delta || !isChainBase(r.format)) throw new SnapflowError("snapshot_unusable", `${what}, which is neither a squashfs image nor a file-level snapshot (a chain starts with one)`);
      return;
    }
    if (r.delta?.kind !== "overlay-upper") throw new SnapflowError("snapshot_unusable", `${what}, which is not an overlay delta`);
    if (!laysOver(r, records[i - 1]!)) throw new SnapflowError("snapshot_unusable", `${what}, whose parent ${r.delta.base} is not the link before it (${ids[i - 1]})`);
  });
  const deltas = [...(records.slice(1) as SnapshotRecord[]), snapshot];
  if (!laysOver(snapshot, records.at(-1)!)) throw new SnapflowError("snapshot_unusable", `overlay delta ${snapshot.id}'s chain ends with ${ids.at(-1)}, neither its parent ${snapshot.delta.base} nor a compaction of it`);
  if (deltas.length > MAX_OVERLAY_CHAIN) throw new SnapflowError("snapshot_unusable", `overlay delta ${snapshot.id} lies ${deltas.length} deltas over ${ids[0]}; a chain holds at most ${MAX_OVERLAY_CHAIN}`);
  return { image: records[0]!, deltas, ...(at >= 0 ? { skipped: at + 1 } : {}) };
}

/**
 * The chain a new overlay delta taken over `parent` records: the parent's own as it resolves, then the parent — or,
 * when the parent has a compaction, that compaction alone. Refused (400, naming `field`) past MAX_OVERLAY_CHAIN
 * deltas after the image or compaction: the workspace must be backed up whole again first (or its chain compacted).
 */
export async function chainOver(d: { store: ObjectStore; kv: KVNamespace }, parent: SnapshotRecord, field: string): Promise<string[]> {
  const own = parent.delta?.kind === "overlay-upper" ? await compactionOf(d, parent.id, tenantOf(parent)) : null;
  if (own) return [own.id];
  const { image, deltas } = await readOverlayChain(d, parent);
  const chain = [image.id, ...deltas.map((x) => x.id)];
  if (deltas.length + 1 > MAX_OVERLAY_CHAIN) {
    throw new SnapflowError("bad_request", `${field}: ${parent.id} is the ${deltas.length}th overlay delta over ${image.id}, and a chain holds at most ${MAX_OVERLAY_CHAIN}; back the workspace up whole (squashfs-chunked) and take deltas over that, or let its compaction finish`, { field });
  }
  return chain;
}
