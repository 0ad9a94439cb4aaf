// Content-addressed chunks and lazy mounts.
// Part of the agent's protocol (../protocol.ts re-exports every part): both sides import it.
import { z } from "zod";
import { SquashfsFormat } from "./formats.ts";
import { ClearBody } from "./images.ts";

// ---- Content-addressed chunks and lazy mounts (chunks.ts, lazy-mount.ts; the helper is native/lazy) ----
//   POST   /v1/chunks/index   ChunkIndexBody   cut an image file into chunks → the index (also written to `output`)
//   POST   /v1/chunks/upload  ChunkUploadBody  PUT the chunks named in `urls` (the ones the store lacks) from the
//                                             image → {chunks, bytes, retries, ms}
//   POST   /v1/lazy/mount     LazyMountBody    start the lazy FUSE file over the index, then mount the image from it
//                                             read-only at `path` (kernel squashfs, or squashfuse) when one is given
//                                             → {ms, readyMs, mounted, status}
//   POST   /v1/lazy/urls      LazyUrlsBody     add URLs to a mount started with moreUrls (the last call says so) → {urls}
//   POST   /v1/lazy/remount   LazyRemountBody  mount the image at `path` from a helper that still serves (a mount
//                                             started without a path; a restore's swap does it at its target, SwapMount)
//                                             → {ms, how, mounted}; the image already there is the answer; 404 if no helper
//   POST   /v1/lazy/wait      LazyWaitBody     wait until the mount's image is complete or its prefetch ended → LazyStatus
// Mounts made here are listed and undone by GET/DELETE /v1/mounts like any other (the FUSE file is kind "lazy").

/** A chunk's name: the SHA-256 of its bytes, lowercase hex. */
export const CHUNK_DIGEST = z.string().regex(/^[0-9a-f]{64}$/, "a chunk digest is 64 lowercase hex characters (SHA-256)");

/** The snapshot's index of an image's chunks (native/lazy/README.md "Index"): chunks tile [0, size) in order. */
export const ChunkIndex = z.object({
  version: z.literal(1),
  size: z.number().int().nonnegative(),
  sha256: CHUNK_DIGEST,
  avgChunk: z.number().int().positive(),
  chunks: z.array(z.object({ sha256: CHUNK_DIGEST, offset: z.number().int().nonnegative(), size: z.number().int().positive() }).strict()),
  /** a squashfs image's tables (from its superblock): what a mount and a metadata walk read besides the first chunk */
  tables: z.object({ from: z.number().int().nonnegative(), to: z.number().int().positive() }).strict().optional(),
}).superRefine((x, ctx) => {
  let at = 0;
  for (const [i, c] of x.chunks.entries()) {
    if (c.offset !== at) return ctx.addIssue({ code: "custom", path: ["chunks", i, "offset"], message: `chunks must tile the image: expected offset ${at}` });
    at += c.size;
  }
  if (at !== x.size) ctx.addIssue({ code: "custom", path: ["size"], message: `the chunks cover ${at} bytes, not ${x.size}` });
  if (x.tables && (x.tables.to <= x.tables.from || x.tables.to > x.size)) ctx.addIssue({ code: "custom", path: ["tables"], message: `tables [${x.tables.from}, ${x.tables.to}) do not lie inside the image's ${x.size} bytes` });
});
export type ChunkIndex = z.infer<typeof ChunkIndex>;

export const ChunkIndexBody = z.object({
  /** the staged image */
  image: z.string(),
  /** where the index is written too (the upload reads it) */
  output: z.string(),
  avg: z.number().int().min(64 * 1024).max(8 * 2 ** 20),
}).strict();

/** `urls`: presigned PUT URL per chunk digest; only these chunks are sent. */
const ChunkUrls = z.record(CHUNK_DIGEST, z.string());

export const ChunkUploadBody = z.object({
  image: z.string(),
  index: z.string(),
  urls: ChunkUrls,
  concurrency: z.number().int().min(1).max(64).default(8),
  retries: z.number().int().min(0).max(10).default(4),
}).strict();

export const LazyMountBody = z.object({
  /** the index file in the sandbox (downloaded and hash-checked by the restore's transfer step) */
  index: z.string(),
  /** presigned GET URL per distinct chunk digest */
  urls: ChunkUrls,
  /** this mount's own directory: the FUSE mountpoint, the URL file and the status file live in it */
  work: z.string(),
  /** the chunk cache, content-addressed and shared by every lazy mount of the sandbox (a fork reuses its parent's) */
  cache: z.string(),
  /** where the image is mounted read-only (an overlay's lower directory); without it only the FUSE file is made,
   *  and the image is mounted where it is wanted later (a restore's target, by its swap: SwapMount) */
  path: z.string().optional(),
  format: SquashfsFormat,
  /** parallel background fetches (0: on demand only) */
  prefetch: z.number().int().min(0).max(64).default(32),
  /** `urls` is a first part: more come through POST /v1/lazy/urls; until the last, a chunk without one waits for it */
  moreUrls: z.boolean().default(false),
  /** what an earlier attempt may have left, cleared first as POST /v1/clear would (a round trip fewer) */
  clear: ClearBody.optional(),
}).strict();

export const LazyUrlsBody = z.object({
  /** the lazy mount's own directory (LazyMountBody.work) */
  work: z.string(),
  /** more presigned GET URLs, added to those the mount has */
  urls: ChunkUrls,
  /** these are the last: a chunk still without a URL has none coming */
  last: z.boolean(),
}).strict();

export const LazyRemountBody = z.object({
  /** the lazy mount's own directory (LazyMountBody.work), whose helper still serves */
  work: z.string(),
  /** where the image is mounted again, read-only */
  path: z.string(),
  format: SquashfsFormat,
}).strict();

export const LazyWaitBody = z.object({
  /** the mount's work directory (LazyMountBody.work) */
  work: z.string(),
  /** how long to wait at most before answering the status as it is */
  timeoutMs: z.number().int().min(0).max(10 * 60_000).default(60_000),
}).strict();

/**
 * status.json of a lazy mount (native/lazy/README.md), as the agent answers it. A files-mount's (kind "files",
 * internal/filesfs status.go) serves an index's tree, not an image: no imageSha256, size, index count or on-demand list.
 */
export interface LazyStatus {
  kind?: "files";
  state: "mounting" | "ready" | "complete" | "stopped";
  prefetch: "pending" | "running" | "done" | "off";
  imageSha256?: string;
  size?: number;
  startedAt: string;
  readyMs: number;
  firstReadMs: number;
  completeMs: number;
  /** `read`: distinct chunks the mount has read from so far, whoever fetched them (what its readers needed) */
  chunks: { index?: number; total: number; local: number; cached: number; onDemand: number; ahead: number; failed: number; read: number };
  bytes: { total: number; local: number; fetched: number; onDemand: number; ahead: number; read: number };
  fetchAttempts: number;
  onDemandChunks: { index: number; sha256: string; atMs: number }[];
  failed: { index: number; sha256: string; reason: string; attempts: number; atMs: number }[];
}
// ---- end of chunks and lazy mounts ----
