// Moving files and archives over presigned URLs: split, hash, upload, download, parallel multipart and ranged transfers.
// Part of the agent's protocol (../protocol.ts re-exports every part): both sides import it.
import { z } from "zod";
import { R2_MULTIPART } from "../r2-limits.ts";
import { TarFormat } from "./formats.ts";
import { SinglePassFields } from "./archive.ts";
import { ManifestTotals } from "./manifest.ts";
import { ExtractExpectation, Ownership, StoredManifest } from "./trees.ts";

export const SplitBody = z.object({ path: z.string(), chunkBytes: z.number().int().min(1 << 20).max(1 << 30) });

export const HashUrlBody = z.object({ url: z.string() });
export const UploadBody = z.object({
  path: z.string(),
  url: z.string(),
  /** send If-None-Match: * (the Worker signed it into the URL: the PUT may only create the object) */
  createOnly: z.boolean().default(false),
});
export const DownloadBody = z.union([
  /** size: the object's bytes as its record says (a hint: a small one is fetched by the agent itself, engine-get.ts) */
  z.object({ url: z.string(), output: z.string(), size: z.number().int().nonnegative().optional() }).strict(),
  z.object({
    url: z.string(),
    extract: z.object({
      path: z.string(), format: TarFormat, ...ExtractExpectation, ...Ownership,
      /**
       * an overlay delta's layer manifest (on the store's origin, its record's SHA-256): fetched while the archive is
       * extracted, and the directories it lists as opaque marked so in the extracted tree, without a round trip of its
       * own → the answer's `opaque`: how many were marked
       */
      opaque: StoredManifest.optional(),
    }),
  }).strict(),
]);

// ---- Parallel presigned transfers (presigned-multipart.ts, presigned-ranged.ts) ----
//   POST   /v1/upload-multipart  UploadMultipartBody  cut a tar stream or a staged file into equal parts, PUT each
//                                                     to its presigned UploadPart URL → {bytes, sha256, parts, ms, peakBufferedBytes}
//                                                     With source.archive.manifestOut: single pass, as GET /v1/archive
//                                                     (the walk names tar's entries; the manifest from the stream) → also {manifest}
//   POST   /v1/tree-size         TreeSizeBody         count the tree: {entries, bytes, tarMax, ms, by}: tarMax bounds its
//                                                     tar archive, so the Worker signs enough part URLs up front
//   POST   /v1/download-ranged   DownloadRangedBody   parallel Range GETs of one presigned URL into a file or, in
//                                                     order, into the extractor → {bytes, sha256, ms, tool, ranges?, peakBufferedBytes?}

/** The agent holds at most (concurrency + 1) × partSize bytes of an upload; refuse requests that would exceed this. */
export const MULTIPART_MAX_BUFFER_BYTES = 2 * 2 ** 30;

export const UploadMultipartBody = z
  .object({
    source: z.union([
      /**
       * tar (+ compressor) of the tree at `path`, exactly as POST /v1/archive makes it, cut while it streams. With
       * `manifestOut` (what a backup sends): single pass, the manifest of exactly what was archived written there,
       * tar's entries named by the same sorted walk (less the request's selection); without it, tar's own pass in
       * directory order, which no manifest describes (a hard link may point either way). With `base` (and
       * manifestOut): a delta, only what changed since that manifest, as GET /v1/archive makes one.
       */
      z.object({ archive: z.object({ path: z.string(), format: TarFormat, ...SinglePassFields }).strict() }).strict(),
      /** a staged file in the sandbox */
      z.object({ file: z.string() }).strict(),
    ]),
    /** bytes of every part but the last; R2 needs ≥ 5 MiB */
    partSize: z.number().int().min(R2_MULTIPART.minPartBytes, `must be at least 5 MiB (${R2_MULTIPART.minPartBytes} bytes), R2's minimum part size`).max(R2_MULTIPART.maxPartBytes),
    /** parts PUT at once */
    concurrency: z.number().int().min(1).max(64).default(4),
    /** urls[i]: the presigned UploadPart URL (partNumber=i+1&uploadId=...) of part i + 1 */
    urls: z.array(z.string()).min(1).max(R2_MULTIPART.maxParts),
    /** extra attempts per part on a network error, 5xx or 429 */
    retries: z.number().int().min(0).max(10).default(2),
  })
  .strict()
  .refine((b) => (b.concurrency + 1) * b.partSize <= MULTIPART_MAX_BUFFER_BYTES, {
    path: ["partSize"],
    message: `(concurrency + 1) × partSize must stay within ${MULTIPART_MAX_BUFFER_BYTES} bytes of agent memory`,
  });
export type UploadMultipartBody = z.infer<typeof UploadMultipartBody>;

const SHA256_HEX = z.string().regex(/^[0-9a-f]{64}$/, "64 lowercase hex characters (SHA-256)");

/**
 * What POST /v1/upload-multipart answers. The Worker parses it rather than trusting its shape: the ETags and
 * hashes go into the CompleteMultipartUpload body it sends the store, so an ETag may not carry XML.
 */
const count = z.number().int().nonnegative();
export const UploadMultipartResult = z.object({
  bytes: z.number().int().nonnegative(),
  sha256: SHA256_HEX,
  parts: z.array(z.object({
    partNumber: z.number().int().min(1).max(R2_MULTIPART.maxParts),
    etag: z.string().regex(/^[^<>&"'\s]{1,200}$/, "an ETag: 1–200 characters, no XML markup or spaces"),
    bytes: z.number().int().nonnegative(),
    /** of the part's bytes, hashed before its PUT: the store checks it at completion */
    sha256: SHA256_HEX,
  })).min(1).max(R2_MULTIPART.maxParts),
  ms: z.number().nonnegative(),
  peakBufferedBytes: z.number().int().nonnegative(),
  /** single pass (source.archive.manifestOut): the manifest written there, made from the archive's own stream (sha256: of the file) */
  manifest: z.object({ totals: ManifestTotals, entries: z.number().int().nonnegative(), jsonBytes: z.number().int().nonnegative(), walkMs: z.number().nonnegative(), sha256: SHA256_HEX.optional(), layerOf: z.string().optional(), treeSha256: SHA256_HEX.optional() }).optional(),
  /** a delta (source.archive.base): what changed, as the single-pass answer has it */
  delta: z.object({ changed: count, changedBytes: count, deleted: z.array(z.string()), suspects: count, suspectBytes: count, planMs: z.number().nonnegative(), baseFrom: z.enum(["kept", "store"]).optional() }).optional(),
  /** single pass: the native engine's or the agent's own */
  engine: z.enum(["native", "node"]).optional(),
  /** who PUT the parts: the engine itself (no byte through the agent), or the agent cutting a stream */
  uploadedBy: z.enum(["engine", "agent"]).optional(),
});
export type UploadMultipartResult = z.infer<typeof UploadMultipartResult>;

export const TreeSizeBody = z.object({ path: z.string() }).strict();
/** How large a tar archive of the tree can be at most (tarMax), from a metadata pass (container/transfer/tree-size.ts). */
export const TreeSizeResult = z.object({
  entries: z.number().int().nonnegative(),
  bytes: z.number().int().nonnegative(),
  tarMax: z.number().int().nonnegative(),
  ms: z.number().nonnegative(),
  by: z.enum(["native", "node"]),
});
export type TreeSizeResult = z.infer<typeof TreeSizeResult>;

export const DownloadRangedBody = z
  .object({
    url: z.string(),
    /** the object's size (the Worker HEADs it); every 206's Content-Range total must equal it */
    size: z.number().int().nonnegative(),
    output: z.string().optional(),
    extract: z.object({ path: z.string(), format: TarFormat, ...ExtractExpectation, ...Ownership }).strict().optional(),
    /** bytes per Range GET (node); the extract reorder buffer holds at most concurrency × rangeSize */
    rangeSize: z.number().int().min(64 * 2 ** 10).max(256 * 2 ** 20).default(8 * 2 ** 20),
    /** ranges in flight (node), or aria2c's -x/-s connections (≤ 16) */
    concurrency: z.number().int().min(1).max(64).default(4),
    tool: z.enum(["node", "aria2c"]).default("node"),
    /** node: extra attempts per range (resuming where it broke); aria2c: --max-tries = retries + 1 */
    retries: z.number().int().min(0).max(10).default(2),
  })
  .strict()
  .superRefine((b, ctx) => {
    if ((b.output === undefined) === (b.extract === undefined)) ctx.addIssue({ code: "custom", path: ["output"], message: "give exactly one of output and extract" });
    if (b.tool === "aria2c" && b.extract) ctx.addIssue({ code: "custom", path: ["extract"], message: "aria2c writes a file: use output, not extract" });
    if (b.tool === "aria2c" && b.concurrency > 16) ctx.addIssue({ code: "custom", path: ["concurrency"], message: "aria2c allows at most 16 connections" });
  });
export type DownloadRangedBody = z.infer<typeof DownloadRangedBody>;
// ---- end of parallel presigned transfers ----
