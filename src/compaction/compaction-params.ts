// What a compaction is asked to do (the CompactWorkflow's params, parsed: they cross a Workflow boundary), and the
// ids it derives from the delta it compacts, so that starting it twice (a retried step) finds the same instance.
import { z } from "zod";
import { Tenant } from "../snapshots/tenant.ts";

/**
 * A chain is compacted once a sleep lies this many deltas over its image or newest compaction (a backup's
 * compactAfter overrides it), or once the deltas laid over it hold DEFAULT_COMPACT_BYTES: a wake pays per link
 * (a download and an extract) and per byte extracted. docs/lifecycle.md has the measurements that chose both.
 */
export const DEFAULT_COMPACT_AFTER = 4;
export const DEFAULT_COMPACT_BYTES = 8 * 2 ** 20;

export const CompactParams = z.object({
  /** the overlay delta whose tree becomes a whole image */
  delta: z.string().regex(/^[a-z]{2}-\d{14}-[0-9a-f]{8}$/, "a snapshot id"),
  tenant: Tenant,
  /** when the sleep that started it was recorded (the compaction's lag behind it is measured from here) */
  startedAt: z.string().optional(),
}).strict();
export type CompactParams = z.infer<typeof CompactParams>;

/** The tree is woken here in a sandbox of its own, which goes when the compaction ends. */
export const COMPACTOR_PATH = "/workspace/tree";

/** One compaction per delta: its snapshot, its wake and its sandbox are named after the delta. */
export function compactionIds(delta: string) {
  const tail = delta.slice(3);
  return { compactionId: `cp-${tail}`, restoreId: `rc-${tail}`, sandboxId: `compactor-${tail}` };
}
