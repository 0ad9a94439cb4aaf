// After an overlay delta's sleep is recorded: start the compaction of its chain when it is due (compactions.ts).
// Due when the delta lies `compactAfter` deltas (or more) over its chain's image or compaction, or when the deltas
// laid over it hold `compactBytes` (a wake pays per link and per byte extracted) — and no compaction of an earlier
// link of the chain is still running (one at a time per chain: the next sleep is due again once it has ended), over
// a chunked image or a file-level snapshot (a compaction is of the same kind; a chain over a whole downloaded image
// stays as it is, up to MAX_OVERLAY_CHAIN). The Workflow instance is named after the delta: starting it again finds it, and the sleep
// never waits for it.
import type { Deps } from "../deps.ts";
import { errorMessage } from "../errors.ts";
import { readProgress, readSnapshot } from "../snapshots/records.ts";
import { tenantOf } from "../snapshots/tenant.ts";
import { compactionIds, DEFAULT_COMPACT_AFTER, DEFAULT_COMPACT_BYTES, type CompactParams } from "./compaction-params.ts";

export interface CompactionStart {
  ms: number;
  bytes: 0;
  /** the delta's depth over its chain's image (or compaction), and the bytes of the deltas laid over it */
  depth: number;
  layerBytes?: number;
  compactionId?: string;
  /** why none was started */
  skipped?: string;
}

export async function startCompactionIfDue(workflow: Workflow<CompactParams>, d: Deps, snapshotId: string, compactAfter = DEFAULT_COMPACT_AFTER, compactBytes = DEFAULT_COMPACT_BYTES): Promise<CompactionStart> {
  const t = performance.now();
  const done = (r: Omit<CompactionStart, "ms" | "bytes">): CompactionStart => ({ ms: Math.round(performance.now() - t), bytes: 0, ...r });
  const record = await readSnapshot(d.store, d.kv, snapshotId);
  if (record?.delta?.kind !== "overlay-upper") return done({ depth: 0, skipped: "not an overlay delta" });
  const chain = record.delta.chain ?? [record.delta.base];
  const depth = chain.length;
  const links = await Promise.all(chain.map((id) => readSnapshot(d.store, d.kv, id)));
  const image = links[0];
  if (!image?.chunks && image?.format.kind !== "files") return done({ depth, skipped: `the chain's image ${chain[0]} is neither chunked nor file-level` });
  const layerBytes = [...links.slice(1), record].reduce((n, r) => n + (r?.archive.bytes ?? 0), 0);
  if (depth < compactAfter && layerBytes < compactBytes) return done({ depth, layerBytes, skipped: `${depth} deltas of ${layerBytes} bytes: under ${compactAfter} and ${compactBytes}` });
  const running = await Promise.all(chain.slice(1).map(async (id) => ((await readProgress(d.kv, compactionIds(id).compactionId))?.status === "running" ? id : null)));
  const busy = running.find((id) => id !== null);
  if (busy) return done({ depth, layerBytes, skipped: `the compaction of ${busy} is still running` });
  const { compactionId } = compactionIds(snapshotId);
  try {
    await workflow.create({ id: compactionId, params: { delta: snapshotId, tenant: tenantOf(record), startedAt: record.createdAt } });
  } catch (e) {
    // Started already (a retried step): the instance exists. Anything else: no compaction this time, the next sleep is due.
    const exists = await workflow.get(compactionId).then(() => true, () => false);
    if (!exists) return done({ depth, layerBytes, skipped: `not started: ${errorMessage(e)}` });
  }
  return done({ depth, layerBytes, compactionId });
}
