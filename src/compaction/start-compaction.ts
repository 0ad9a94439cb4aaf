// After an overlay delta's sleep is recorded: start the compaction of its chain when it is due (compactions.ts).
// Due when the delta lies a multiple of `compactAfter` deltas over its chain's image or compaction (so a chain being
// compacted is not compacted again at every sleep while the first compaction runs), over a chunked image (a
// compaction is a chunked image; a chain over a whole downloaded image stays as it is, up to MAX_OVERLAY_CHAIN).
// The Workflow instance is named after the delta: starting it again finds it, and the sleep never waits for it.
import type { Deps } from "../deps.ts";
import { errorMessage } from "../errors.ts";
import { DEFAULT_COMPACT_AFTER } from "../snapshots/compactions.ts";
import { readSnapshot, type SnapshotRecord } from "../snapshots/records.ts";
import { tenantOf } from "../snapshots/tenant.ts";
import { compactionIds, type CompactParams } from "./compaction-params.ts";

export interface CompactionStart {
  ms: number;
  bytes: 0;
  /** the delta's depth over its chain's image (or compaction) */
  depth: number;
  compactionId?: string;
  /** why none was started */
  skipped?: string;
}

export async function startCompactionIfDue(workflow: Workflow<CompactParams>, d: Deps, snapshotId: string, compactAfter = DEFAULT_COMPACT_AFTER): Promise<CompactionStart> {
  const t = performance.now();
  const done = (r: Omit<CompactionStart, "ms" | "bytes">): CompactionStart => ({ ms: Math.round(performance.now() - t), bytes: 0, ...r });
  const record = await readSnapshot(d.store, d.kv, snapshotId);
  if (record?.delta?.kind !== "overlay-upper") return done({ depth: 0, skipped: "not an overlay delta" });
  const chain = record.delta.chain ?? [record.delta.base];
  const depth = chain.length;
  if (depth % compactAfter !== 0) return done({ depth, skipped: `depth ${depth} is not a multiple of ${compactAfter}` });
  const image: SnapshotRecord | null = await readSnapshot(d.store, d.kv, chain[0]!);
  if (!image?.chunks) return done({ depth, skipped: `the chain's image ${chain[0]} is not chunked` });
  const { compactionId } = compactionIds(snapshotId);
  try {
    await workflow.create({ id: compactionId, params: { delta: snapshotId, tenant: tenantOf(record), startedAt: record.createdAt } });
  } catch (e) {
    // Started already (a retried step): the instance exists. Anything else: no compaction this time, the next is due later.
    const exists = await workflow.get(compactionId).then(() => true, () => false);
    if (!exists) return done({ depth, skipped: `not started: ${errorMessage(e)}` });
  }
  return done({ depth, compactionId });
}
