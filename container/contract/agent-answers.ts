// What the agent answers, as schemas the Worker parses every answer against before acting on it (issue 21: a
// sandbox runs code nobody reviewed, so its agent may answer anything). The shapes are protocol.ts's; each schema
// here is checked against its type by the compiler (`satisfies z.ZodType<…>`), so the two cannot drift.
//
// What is bounded or exact matters where an answer becomes a store key, a URL the Worker signs, or a record: hashes
// are exactly 64 lowercase hex, chunk indexes are protocol.ts's ChunkIndex (tiling, digests), counts are
// non-negative integers, lists a person reads are capped. Objects are loose (unknown fields pass through unread)
// so an agent one version ahead still answers an older Worker; no Worker code reads a field a schema does not name.
import { z } from "zod";
import { ChunkIndex, ManifestSchema, ManifestTotals, SelectionRecord } from "./protocol.ts";
import type * as P from "./protocol.ts";

const count = z.number().int().nonnegative();
const ms = z.number();
export const SHA256 = z.string().regex(/^[0-9a-f]{64}$/, "a SHA-256 in lowercase hex");
/** A sandbox path the agent names (a staged file, a mount): absolute, no NUL, bounded. */
const sandboxPath = z.string().min(1).max(4096).refine((p) => p.startsWith("/") && !p.includes("\0"), "an absolute sandbox path");

export const WrittenBytesAnswer = z.looseObject({ bytes: count, sha256: SHA256, ms }) satisfies z.ZodType<P.WrittenBytes>;
/** A download: its bytes and SHA-256; a delta's also how many opaque directories were marked (its layer manifest came
 * with it). */
export const DownloadAnswer = WrittenBytesAnswer.extend({ opaque: count.optional(), engine: z.enum(["native", "node"]).optional() });

const Difference = z.looseObject({
  path: z.string(),
  kind: z.enum(["missing", "extra", "changed"]),
  fields: z.array(z.looseObject({ name: z.string(), expected: z.unknown(), actual: z.unknown() })).max(64).optional(),
}) satisfies z.ZodType<P.Difference>;
const Counts = z.looseObject({ missing: count, extra: count, changed: count });

export const VerifyAnswer = z.looseObject({
  equal: z.boolean(),
  counts: Counts,
  differences: z.array(Difference).max(1000),
  totals: ManifestTotals,
  ms,
});
export const VerifyTreeAnswer = VerifyAnswer.extend({ verified: z.looseObject({ content: z.string(), metadata: z.string(), entries: count }) });

export const SinglePassAnswer = z.looseObject({
  bytes: count,
  sha256: SHA256,
  ms,
  manifest: z.looseObject({ totals: ManifestTotals, entries: count, jsonBytes: count, walkMs: ms, sha256: SHA256.optional(), layerOf: z.string().optional(), treeSha256: SHA256.optional() }),
  delta: z.looseObject({ changed: count, changedBytes: count, deleted: z.array(z.string()), suspects: count, suspectBytes: count, planMs: ms }).optional(),
});
export const ImageAnswer = SinglePassAnswer.extend({ onePass: z.boolean() });

export const StatAnswer = z.looseObject({ exists: z.boolean(), type: z.string().optional(), size: count.optional(), entries: count.optional() });

export const DeltaAnswer = z.looseObject({ manifest: ManifestSchema, changed: count, changedBytes: count, deleted: z.array(z.string()) });

export const OverlayLayerAnswer = z.looseObject({
  manifest: z.looseObject({ bytes: count, sha256: SHA256, entries: count, removed: count, opaque: count, totals: ManifestTotals }),
  changedBytes: count,
  ms,
}) satisfies z.ZodType<P.OverlayLayerResult>;

export const MountEntryAnswer = z.looseObject({
  path: sandboxPath,
  kind: z.enum(["image", "overlay", "lazy"]),
  source: z.string(),
  how: z.enum(["mount-kernel", "mount-fuse", "kernel", "fuse"]),
  tool: z.string(),
  fstype: z.string(),
  since: z.string(),
  options: z.array(z.string()).optional(),
  upper: sandboxPath.optional(),
  work: sandboxPath.optional(),
}) satisfies z.ZodType<P.MountEntry>;

export const MaterializeAnswer = z.looseObject({ ms, bytes: count, mounted: MountEntryAnswer.optional(), relinked: count.optional() }) satisfies z.ZodType<P.MaterializeResult>;

export const ChunkIndexAnswer = z.looseObject({ index: ChunkIndex, ms });
export const ChunkUploadAnswer = z.looseObject({ chunks: count, bytes: count, retries: count, ms });

const chunkRef = z.looseObject({ index: count, sha256: SHA256, atMs: ms });
export const LazyStatusAnswer = z.looseObject({
  kind: z.literal("files").optional(),
  state: z.enum(["mounting", "ready", "complete", "stopped"]),
  prefetch: z.enum(["pending", "running", "done", "off"]),
  imageSha256: SHA256.optional(),
  size: count.optional(),
  startedAt: z.string(),
  readyMs: z.number(),
  firstReadMs: z.number(),
  completeMs: z.number(),
  chunks: z.looseObject({ index: count.optional(), total: count, local: count, cached: count, onDemand: count, ahead: count, failed: count, read: count }),
  bytes: z.looseObject({ total: count, local: count, fetched: count, onDemand: count, ahead: count, read: count }),
  fetchAttempts: count,
  onDemandChunks: z.array(chunkRef).default([]),
  failed: z.array(chunkRef.extend({ reason: z.string(), attempts: count })),
}) satisfies z.ZodType<P.LazyStatus>;

export const LazyMountAnswer = z.looseObject({
  ms, readyMs: ms, fuseMs: ms, mountMs: ms, how: z.enum(["mount-kernel", "mount-fuse"]).optional(), mounted: z.array(MountEntryAnswer), status: z.string(), chunks: count, local: count,
});

export const FilesMountAnswer = z.looseObject({
  ms, fuseMs: ms, readyMs: ms, entries: count, chunks: count, local: count, work: sandboxPath, status: z.string(), mounted: MountEntryAnswer,
});

export const SwapJournalAnswer = z.looseObject({
  id: z.string(),
  target: sandboxPath,
  staged: sandboxPath,
  old: sandboxPath,
  state: z.enum(["staging", "swapping", "swapped", "committed"]),
  hadTarget: z.boolean().optional(),
  unmounted: z.array(sandboxPath).optional(),
  startedAt: z.string(),
  updatedAt: z.string(),
}) satisfies z.ZodType<P.SwapJournal>;

export const ProbeAnswer = z.looseObject({
  agent: z.looseObject({ release: z.string() }).optional(),
  kernel: z.string(),
  filesystems: z.array(z.string()),
  fuse: z.boolean(),
  capSysAdmin: z.boolean(),
  root: z.boolean(),
  tools: z.record(z.string(), z.looseObject({ path: z.string(), version: z.string() }).nullable()),
  cpus: count,
  memory: z.looseObject({ totalBytes: count, freeBytes: count }),
  disk: z.looseObject({ path: z.string(), freeBytes: count, totalBytes: count }),
  runtime: z.string(),
}) satisfies z.ZodType<P.ProbeResult>;

export { SelectionRecord };
