// The file-level content-addressed backup (issue 24; native/lazy/internal/filecas): the engine's files-pack.
// Part of the agent's protocol (../protocol.ts re-exports every part): both sides import it.
import { z } from "zod";
import { FILES_MAX_DEPTH, MAX_OVERLAY_CHAIN, Sha256Hex } from "./trees.ts";
import { R2_MULTIPART } from "../r2-limits.ts";
import { ManifestTotals, SelectionRecord, SelectionSpec } from "./manifest.ts";
import { MULTIPART_MAX_BUFFER_BYTES } from "./transfer.ts";

// ---- File-level backup (filecas-pack.ts; the engine is `snapflow-lazy files-pack`) ----
//   POST   /v1/files/pack   FilesPackBody   back the tree at `path` up file by file: a file unchanged since `base` (an
//                                          earlier index) by restic's rule keeps its chunk list unread; the others'
//                                          new chunks are packed (one zstd frame each) and PUT in parts to `urls`;
//                                          the manifest to `manifestOut` (absent: none is written, its size and
//                                          SHA-256 still answered), the index to `indexOut` → FilesPackResult
//                                          (no new chunk: no part PUT, `pack: null`, `parts: []`). A base the engine
//                                          cannot use (missing, not the bytes `sha256` names, not an index) is a 400
//                                          naming `base` before any byte is PUT: the Worker backs up without it.

const count = z.number().int().nonnegative();

/** A pack's name is the id of the snapshot that wrote it (native/lazy/internal/filecas/format.go packName). */
export const PACK_NAME = z.string().regex(/^[A-Za-z0-9_-]{1,128}$/, "a snapshot id: 1–128 letters, digits, '-' or '_'");

export const FilesPackBody = z
  .object({
    /** the tree */
    path: z.string(),
    manifestOut: z.string().optional(),
    indexOut: z.string(),
    /** the pack's name: this snapshot's id */
    name: PACK_NAME,
    /** FastCDC's average chunk size (min avg/4, max avg*4); the index's bound on a chunk (8 MiB) caps it at 2 MiB */
    avgChunk: z.number().int().min(1024).max(2 * 2 ** 20).refine((n) => (n & (n - 1)) === 0, "a power of two").optional(),
    level: z.number().int().min(-7).max(22).optional(),
    /** what the backup leaves out (absent: the request's SELECTION_HEADER, as every backup request carries it) */
    selection: SelectionSpec.optional(),
    /**
     * the previous snapshot's index: the sandbox's kept copy (`file`) when it is there and hashes to `sha256`, else
     * the store's (`url`, a presigned GET on the store's origin)
     */
    base: z.object({
      file: z.string().optional(), url: z.string().optional(), sha256: Sha256Hex,
      /** a restored tree's stat keys for this index (POST /v1/files/unpack statsOut): taken instead of the index's */
      stat: z.string().optional(),
      /**
       * the tree at `path` is an overlay whose lowest layer is this index's own tree (files-mount) under these layer
       * directories, lowest first: a file none of them holds is taken from the index unread (a compaction's)
       */
      layers: z.array(z.string()).max(MAX_OVERLAY_CHAIN + 1).optional(),
      /** when the base is a layer: the objects beneath it, its whole index first (each a kept file, a url or both) */
      chain: z.array(z.object({ file: z.string().optional(), url: z.string().optional(), sha256: Sha256Hex }).strict()
        .refine((o) => o.file !== undefined || o.url !== undefined, "names a file, a url or both")).max(FILES_MAX_DEPTH).optional(),
    }).strict()
      .refine((b) => b.file !== undefined || b.url !== undefined, "names a file, a url or both").optional(),
    /**
     * write the index as a layer over the base's (only what changed; native/lazy/internal/filecas/layer.go); over a base
     * FILES_MAX_DEPTH layers deep, a layer over the whole index beneath it (depth 1), or a whole index once those
     * layers outgrow a quarter of it (over `base.layers`, a wake's sleep, too)
     */
    layer: z.boolean().optional(),
    /** where the tree's own stat keys are kept when the layer keeps its parent's for entries only their keys changed (a restored tree) */
    statsOut: z.string().optional(),
    /** urls[i]: the presigned UploadPart URL of the pack's part i + 1 */
    urls: z.array(z.string()).min(1).max(R2_MULTIPART.maxParts),
    /** bytes of every part but the last; R2 needs ≥ 5 MiB */
    partSize: z.number().int().min(R2_MULTIPART.minPartBytes, `must be at least 5 MiB (${R2_MULTIPART.minPartBytes} bytes), R2's minimum part size`).max(R2_MULTIPART.maxPartBytes),
    concurrency: z.number().int().min(1).max(64).default(4),
    /** extra attempts per part (and the base's GET) on a network error, 5xx or 429 */
    retries: z.number().int().min(0).max(10).default(2),
  })
  .strict()
  .refine((b) => (b.concurrency + 1) * b.partSize <= MULTIPART_MAX_BUFFER_BYTES, {
    path: ["partSize"],
    message: `(concurrency + 1) × partSize must stay within ${MULTIPART_MAX_BUFFER_BYTES} bytes of agent memory`,
  });
export type FilesPackBody = z.infer<typeof FilesPackBody>;

const Counts = z.object({ files: count, bytes: count }).strict();

/**
 * What POST /v1/files/pack answers (the engine's result, parsed by the agent and again by the Worker): the parts go
 * into the CompleteMultipartUpload the Worker sends, so an ETag may not carry XML, and the parts must add up to the pack.
 */
export const FilesPackResult = z
  .object({
    entries: count,
    totals: ManifestTotals,
    jsonBytes: count,
    /** the manifest file's SHA-256, hashed by the engine as it wrote it */
    jsonSha256: Sha256Hex,
    excluded: z.record(z.string(), count).nullable(),
    walkMs: count,
    /** from the pass's start: its base read and decoded (beside the walk), its last file chunked, its pack's last part stored */
    baseMs: count,
    readMs: count,
    storedMs: count,
    ms: count,
    index: z.object({ bytes: count, sha256: Sha256Hex, chunks: count }).strict(),
    /** the index's layers over its whole index (0: a whole index; native/lazy/internal/filecas/layer.go), and the names a layer drops */
    depth: count.max(FILES_MAX_DEPTH),
    removed: count,
    /** every pack the index names (the base's still referenced, and this one): the Worker checks them against the parent's record */
    packs: z.array(z.object({ name: PACK_NAME, bytes: count }).strict()).max(100_000),
    /** null: no chunk was new, nothing was PUT */
    pack: z.object({ name: PACK_NAME, bytes: count, sha256: Sha256Hex }).strict().nullable(),
    parts: z.array(z.object({
      partNumber: z.number().int().min(1).max(R2_MULTIPART.maxParts),
      etag: z.string().regex(/^[^<>&"'\s]{1,200}$/, "an ETag: 1–200 characters, no XML markup or spaces"),
      bytes: count,
      sha256: Sha256Hex,
    }).strict()),
    peakBufferedBytes: count,
    retries: count,
    /** files opened and read, and their data bytes */
    read: Counts,
    /** files whose chunk lists came from the base unread, and their sizes */
    reused: Counts,
    /** chunks the pack holds, and their bytes before compression */
    newChunks: count,
    newBytes: count,
    /** the selection record the manifest holds (absent: no selection); the index does not, and the record keeps it */
    selection: SelectionRecord.optional(),
  })
  .strict()
  .superRefine((r, ctx) => {
    const partBytes = r.parts.reduce((n, p) => n + p.bytes, 0);
    if (r.pack === null ? r.parts.length > 0 : partBytes !== r.pack.bytes) ctx.addIssue({ code: "custom", path: ["parts"], message: `the parts hold ${partBytes} bytes; the pack is ${r.pack?.bytes ?? "absent"}` });
    if (r.parts.some((p, i) => p.partNumber !== i + 1)) ctx.addIssue({ code: "custom", path: ["parts"], message: "parts are numbered 1, 2, … in order" });
  });
export type FilesPackResult = z.infer<typeof FilesPackResult>;
