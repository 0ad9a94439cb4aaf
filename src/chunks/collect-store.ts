// The store's shared objects collected in one run: image chunks no index references (chunk-gc.ts) and file-level
// packs no record names (pack-gc.ts), side by side over one listing of snapshots/ (snapshot-listing.ts). The
// hourly lifecycle run and POST /api/chunks/gc call this; each collector alone still works (and lists for itself).
import type { Deps } from "../deps.ts";
import { collectChunks, type ChunkGcOptions, type ChunkGcReport } from "./chunk-gc.ts";
import { collectPacks, type PackGcReport } from "./pack-gc.ts";
import { SnapshotListing } from "./snapshot-listing.ts";

export async function collectStore(d: Deps, options: ChunkGcOptions = {}): Promise<{ chunks: ChunkGcReport; packs: PackGcReport }> {
  const listing = new SnapshotListing(d.store);
  const [chunks, packs] = await Promise.all([collectChunks(d, options, listing), collectPacks(d, options, listing)]);
  return { chunks, packs };
}
