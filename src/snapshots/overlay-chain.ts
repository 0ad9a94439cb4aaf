// Chains of overlay deltas: a workspace slept and woken again. A wake of an overlay delta lays its chain read-only —
// the image (its base), then each delta in the order they were taken — under a fresh, empty upper, so the next
// sleep's delta holds only what changed since that wake, and records the snapshot it was woken from as its parent
// (`delta.base`) and everything below as `delta.chain` (the image first, ending with the parent). Deltas from
// before chains have no `chain`: they lay over their image alone (`[base]`).
//
// A chain is read whole (its records fetched at once, not link by link) and every link is checked before anything
// is laid: it exists, belongs to the same tenant, is an overlay delta whose own chain is the prefix before it (the
// first link: a squashfs image, not a delta), and the chain is at most MAX_OVERLAY_CHAIN deltas deep. Deleting a
// link is refused while a later delta builds on it (each delta marks itself on its parent: dependants.ts).
import { z } from "zod";
import { MAX_OVERLAY_CHAIN } from "../../container/contract/protocol.ts";
import { SnapflowError } from "../errors.ts";
import type { ObjectStore } from "../store/object-store.ts";
import { readSnapshot, type SnapshotRecord } from "./records.ts";
import { tenantOf } from "./tenant.ts";

export { MAX_OVERLAY_CHAIN };

const SnapshotId = z.string().regex(/^[a-z]{2}-\d{14}-[0-9a-f]{8}$/, "a snapshot id");

/** An overlay delta's link, as its record keeps it (the store's JSON is parsed, not cast). */
const OverlayLink = z.looseObject({
  kind: z.literal("overlay-upper"),
  base: SnapshotId,
  chain: z.array(SnapshotId).min(1).max(MAX_OVERLAY_CHAIN).optional(),
});

/** What an overlay delta lays over: the image first, ending with its parent. */
export function chainOf(record: Pick<SnapshotRecord, "id" | "delta">): string[] {
  const link = OverlayLink.safeParse(record.delta);
  if (!link.success) throw new SnapflowError("snapshot_unusable", `snapshot ${record.id}'s record has no valid overlay delta link (${link.error.issues[0]!.path.join(".")}: ${link.error.issues[0]!.message})`);
  const chain = link.data.chain ?? [link.data.base];
  if (chain.at(-1) !== link.data.base) throw new SnapflowError("snapshot_unusable", `snapshot ${record.id}'s chain ends with ${chain.at(-1)}, not its parent ${link.data.base}`);
  if (new Set([...chain, record.id]).size !== chain.length + 1) throw new SnapflowError("snapshot_unusable", `snapshot ${record.id}'s chain names a snapshot twice`);
  return chain;
}

export interface OverlayChain {
  /** the squashfs image at the bottom */
  image: SnapshotRecord;
  /** the overlay deltas over it, oldest first, ending with the snapshot asked for (none: it is the image) */
  deltas: SnapshotRecord[];
}

/**
 * The chain `snapshot` lays over, every link read and checked (see the top of this file). An image is a chain of
 * its own. A broken chain is `snapshot_unusable`, naming the link.
 */
export async function readOverlayChain(d: { store: ObjectStore; kv: KVNamespace }, snapshot: SnapshotRecord): Promise<OverlayChain> {
  if (snapshot.delta?.kind !== "overlay-upper") return { image: snapshot, deltas: [] };
  const ids = chainOf(snapshot);
  const records = await Promise.all(ids.map((id) => readSnapshot(d.store, d.kv, id)));
  records.forEach((r, i) => {
    const id = ids[i]!;
    const what = `overlay delta ${snapshot.id} lays over ${id}`;
    if (!r) throw new SnapflowError("snapshot_unusable", `${what}, which does not exist any more`);
    if (tenantOf(r) !== tenantOf(snapshot)) throw new SnapflowError("snapshot_unusable", `${what}, another tenant's snapshot`);
    if (i === 0) {
      if (r.delta || r.format.kind !== "squashfs") throw new SnapflowError("snapshot_unusable", `${what}, which is not a squashfs image (a chain starts with one)`);
      return;
    }
    if (r.delta?.kind !== "overlay-upper") throw new SnapflowError("snapshot_unusable", `${what}, which is not an overlay delta`);
    const own = chainOf(r);
    if (own.length !== i || own.some((x, j) => x !== ids[j])) throw new SnapflowError("snapshot_unusable", `${what}, whose own chain (${own.join(" → ")}) is not the one before it`);
  });
  return { image: records[0]!, deltas: [...(records.slice(1) as SnapshotRecord[]), snapshot] };
}

/**
 * The chain a new overlay delta taken over `parent` records: the parent's own, then the parent. Refused (400,
 * naming `field`) past MAX_OVERLAY_CHAIN deltas: the workspace must be backed up whole again first.
 */
export async function chainOver(d: { store: ObjectStore; kv: KVNamespace }, parent: SnapshotRecord, field: string): Promise<string[]> {
  const { image, deltas } = await readOverlayChain(d, parent);
  const chain = [image.id, ...deltas.map((x) => x.id)];
  if (deltas.length + 1 > MAX_OVERLAY_CHAIN) {
    throw new SnapflowError("bad_request", `${field}: ${parent.id} is the ${deltas.length}th overlay delta over ${image.id}, and a chain holds at most ${MAX_OVERLAY_CHAIN}; back the workspace up whole (squashfs-chunked) and take deltas over that`, { field });
  }
  return chain;
}
