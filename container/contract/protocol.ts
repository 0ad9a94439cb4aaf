// The agent's HTTP protocol: every JSON body and query that crosses into the agent, as zod schemas. The Worker
// imports the same schemas, so the two sides cannot drift apart.
//
//   GET    /v1/health                      liveness, no token
//   GET    /v1/probe                       what this sandbox can do (tools, filesystems, fuse, caps, cpu, memory, disk)
//   POST   /v1/drop-caches                 sync and drop the page cache when permitted → {dropped, ms, reason?}
//   POST   /v1/datasets     DatasetBody    generate a deterministic dataset at `path`
//   POST   /v1/manifest     PathBody       manifest of a tree (less a backup's selection: SELECTION_HEADER)
//   POST   /v1/selection    SelectionBody  a selection's rules compiled for a tree, and its warnings
//   POST   /v1/verify       VerifyBody     compare a tree with an expected manifest (walks and hashes everything)
//   POST   /v1/verify-tree  VerifyTreeBody compare a tree with a manifest file/URL by metadata (lstat walk); deep:
//                                          true hashes every file too (a mount whose image nobody hashed) → TreeCheck
//   POST   /v1/delta        DeltaBody      changed entries since a base manifest → list file; deleted paths
//   POST   /v1/overlay-layer OverlayLayerBody  an overlay delta's layer manifest (version 2) from its upper
//                                          directory, written to a file → OverlayLayerResult
//   POST   /v1/remove       RemoveBody     remove relative entries below a tree (applying a delta's deletions)
//   GET    /v1/archive?     ArchiveQuery   the tree as an archive, streamed as the response body
//   POST   /v1/archive      ArchiveToFile  the tree as an archive written to a file in the sandbox
//          With manifestOut (both): single pass — the manifest is made from the tar stream as it is archived and
//          written to manifestOut; with base, only what changed by metadata is archived (a delta). POST answers
//          SinglePassResult; GET writes it to resultOut (if given) before the stream ends.
//   GET    /v1/stat?path=                  {exists, type, size, entries}
//   GET    /v1/space?path=                 free and total bytes of the filesystem holding path (or its deepest ancestor), its device
//   GET    /v1/files?path=                 a file's raw bytes (Content-Length set); &encoding=base64 (JSON) or
//                                          base64-sse (events) reproduce the SDK file API for the baselines
//   POST   /v1/split        SplitBody      cut a file into chunk files (the chunked baseline)
//   PUT    /v1/files?path=                 request body → file
//   DELETE /v1/files?path=                 remove a file or tree
//   PUT    /v1/extract?     ExtractQuery   request body (an archive) piped into the extractor
//   POST   /v1/extract      ExtractFile    extract an archive file in the sandbox
//          With an expected manifest (here, and in /v1/download and /v1/download-ranged extract): each entry is
//          checked as it streams into tar, then a metadata walk → {…, verified, equal}; a mismatch is 422 verify_failed.
//   POST   /v1/hash-url     HashUrlBody    GET a presigned URL to the end and hash it (verifies a stored archive)
//   POST   /v1/upload       UploadBody     PUT a file in the sandbox to a presigned URL
//   POST   /v1/download     DownloadBody   GET a presigned URL into a file, or piped into the extractor
//   POST   /v1/swap/plan    SwapBody       a restore's swap: where its new tree is built beside the target (journal)
//   POST   /v1/swap/in      SwapInBody     the verified new tree to the target, the old one kept beside it (or an
//                                          empty directory, and the mount it asks for made there at once)
//   POST   /v1/swap/commit  SwapBody       the restore is recorded: remove the old tree
//   POST   /v1/swap/rollback SwapBody      put the target back exactly as it was, remove the new tree
//   GET    /v1/swap?        SwapBody       a swap's journal ({state: "none"} when there is none)
//   POST   /v1/sweep        SweepBody      roll back swaps and remove staging files and images older than a bound
//   POST   /v1/faults       FaultBody      test-only, when the agent runs with SNAPFLOW_AGENT_FAULTS=1
//   DELETE /v1/sandbox                     host agent only: drop this sandbox's root directory
//
// Every request, health included (readiness is authenticated), carries `authorization: Bearer <token>`: this
// sandbox's own token (agent-token.ts); a host agent serving many sandboxes also needs `x-snapflow-sandbox: <id>`.
//
// Errors answer {error: {code, message, field?}} (agent-error.ts): bad_request and path_outside_root 400,
// unauthorized 401, not_found 404, verify_failed 422 (a restore differs from its manifest), store_refused 422 (the
// store refused the bytes for good: BadDigest, PreconditionFailed), tool_failed 500 (a tool exited non-zero, or
// the store or pipe around it failed), internal_error 500 (an exception nothing classified: a bug in the agent),
// unavailable 501 (a tool or kernel feature is missing here), url_expired 502 (a presigned URL expired before it
// was used: fresh URLs would work), injected_fault 503 (test-only), no_space 507 (the disk filled: permanent).
import { z } from "zod";
import { R2_MULTIPART } from "./r2-limits.ts";
import { sandboxRoots } from "./sandbox-roots.ts";

export const SANDBOX_HEADER = "x-snapflow-sandbox";
export const SANDBOX_ID = z.string().regex(/^[a-z0-9][a-z0-9-]{0,62}$/, "a sandbox id is 1–63 of a-z, 0-9 and '-'");

/**
 * Checks a sandbox path's syntax and returns it normalised: absolute, no '..' segment, inside an allowed root.
 * Pure, so the Worker can refuse a bad path with a 400 before anything starts. (Symlink escapes can only be
 * seen inside the sandbox: system/path-confinement.ts checks those.)
 */
export function normalizeSandboxPath(path: string): { ok: true; path: string } | { ok: false; reason: string; outside: boolean } {
  if (path.length === 0) return { ok: false, reason: "is empty", outside: false };
  if (path.includes("\0")) return { ok: false, reason: "contains a NUL byte", outside: false };
  if (!path.startsWith("/")) return { ok: false, reason: `must be an absolute sandbox path like /workspace/app, got '${path}'`, outside: false };
  const segments = path.split("/").filter((x) => x !== "" && x !== ".");
  if (segments.includes("..")) return { ok: false, reason: `must not contain '..' segments: '${path}'`, outside: true };
  const normal = "/" + segments.join("/");
  const roots = sandboxRoots();
  if (!roots.some((root) => normal === root || normal.startsWith(root + "/"))) {
    return { ok: false, reason: `'${path}' is outside the sandbox's allowed roots (${roots.join(", ")})`, outside: true };
  }
  return { ok: true, path: normal };
}

/** A zod schema for sandbox paths: the API validates with it, so a bad path is a 400 naming the field. */
export const SandboxPath = z.string().transform((p, ctx) => {
  const r = normalizeSandboxPath(p);
  if (r.ok) return r.path;
  ctx.addIssue({ code: "custom", message: r.reason });
  return z.NEVER;
});

export const Compression = z.enum(["none", "zstd", "gzip", "pigz", "lz4"]);
export type Compression = z.infer<typeof Compression>;

export const TarFormat = z.object({
  kind: z.literal("tar"),
  compression: Compression,
  level: z.coerce.number().int().min(-7).max(22).optional(),
  threads: z.coerce.number().int().min(0).max(256).optional(),
  long: z.preprocess((v) => (v === "true" ? true : v === "false" ? false : v), z.boolean()).optional(),
});
export type TarFormat = z.infer<typeof TarFormat>;

/**
 * Filesystem images: made to a file (mksquashfs / mkfs.erofs cannot write to a pipe), restored by extracting
 * (unsquashfs, fsck.erofs --extract) or by mounting (kernel, or squashfuse without CAP_SYS_ADMIN).
 */
export const SquashfsFormat = z.object({
  kind: z.literal("squashfs"),
  compression: z.enum(["zstd", "lz4", "lzo", "gzip", "xz"]),
  /** zstd 1–22, gzip 1–9; mksquashfs's default when absent (zstd 15, slow: the seeds' 21.6 s) */
  level: z.number().int().min(1).max(22).optional(),
  /** bytes, a power of two from 4 KiB to 1 MiB; mksquashfs's default 128 KiB when absent */
  blockSize: z.number().int().min(4096).max(1 << 20).refine((n) => (n & (n - 1)) === 0, "a power of two").optional(),
  /**
   * Content-addressed chunks (chunk-index.ts): the image is cut by FastCDC (min avg/4, max 4·avg) into chunks stored
   * as chunks/<sha256>, shared by every snapshot that has them, and the snapshot's archive is their index. The
   * chunking parameters are part of the format: other values cut other chunks (and dedup nothing with these).
   */
  chunks: z.object({ avg: z.number().int().min(64 * 1024).max(8 * 2 ** 20).refine((n) => (n & (n - 1)) === 0, "a power of two") }).strict().optional(),
});
export type SquashfsFormat = z.infer<typeof SquashfsFormat>;

export const ErofsFormat = z.object({
  kind: z.literal("erofs"),
  compression: z.enum(["none", "lz4", "lz4hc"]),
  level: z.number().int().min(0).max(12).optional(),
});
export type ErofsFormat = z.infer<typeof ErofsFormat>;

export const ImageFormat = z.discriminatedUnion("kind", [SquashfsFormat, ErofsFormat]);
export type ImageFormat = z.infer<typeof ImageFormat>;

/** Every archive format a snapshot can have. */
export const ArchiveFormat = z.discriminatedUnion("kind", [TarFormat, SquashfsFormat, ErofsFormat]);
export type ArchiveFormat = z.infer<typeof ArchiveFormat>;

/** The file name extension of an archive format: tar, tar.zst, tar.gz, tar.lz4, sqsh, erofs. */
export function extensionOf(format: ArchiveFormat): string {
  // A chunked image's stored object is its index (the chunks live under chunks/, shared).
  if (format.kind === "squashfs" && format.chunks) return "sqsh.index.json";
  if (format.kind !== "tar") return format.kind === "squashfs" ? "sqsh" : "erofs";
  return { none: "tar", zstd: "tar.zst", gzip: "tar.gz", pigz: "tar.gz", lz4: "tar.lz4" }[format.compression];
}

export const PathBody = z.object({ path: z.string() });

export const DatasetBody = z.object({
  path: z.string(),
  kind: z.enum(["node-modules", "tricky", "added-data"]),
  seed: z.number().int().nonnegative().default(1),
  files: z.number().int().positive().max(2_000_000).optional(),
  bytes: z.number().int().nonnegative().max(64 * 2 ** 30).optional(),
  /** added-data: incompressible bytes on top of the node-modules base (the seed's 10 MB … 5 GB) */
  addedBytes: z.number().int().nonnegative().max(64 * 2 ** 30).optional(),
  /** remove whatever is at `path` first (off by default: destructive; refused where a mount is at or below it) */
  replace: z.boolean().default(false),
});
export type DatasetBody = z.infer<typeof DatasetBody>;

export const EntryType = z.enum(["file", "dir", "symlink", "other"]);
export type EntryType = z.infer<typeof EntryType>;

/**
 * What lstat said of an entry just before the archiver read it (as git's index keeps it): the key that
 * incrementals compare to find changes without reading content. Decimal strings: nanosecond times and inode
 * numbers exceed 2^53. Describes the source tree only; a restore never compares it.
 */
export const EntryStat = z.object({ ino: z.string(), dev: z.string(), mtimeNs: z.string(), ctimeNs: z.string() });
export type EntryStat = z.infer<typeof EntryStat>;

export const ManifestEntry = z.object({
  /** relative to the tree's root, '/'-separated; the root itself is not listed */
  path: z.string(),
  type: EntryType,
  /** permission bits (mode & 0o7777) */
  mode: z.number().int(),
  size: z.number().int(),
  /** seconds since the epoch, floored (what every format keeps: tar's pax records and erofs keep nanoseconds, squashfs does not) */
  mtime: z.number().int(),
  target: z.string().optional(),
  sha256: z.string().optional(),
  /** for the second and later names of a hard-linked file: the first name (in walk order) */
  link: z.string().optional(),
  /** numeric owner and group, as lstat (or the tar header) has them; absent in manifests made before owners were recorded */
  uid: z.number().int().optional(),
  gid: z.number().int().optional(),
  /** absent in manifests made before single-pass archives, and in manifests of restored trees */
  stat: EntryStat.optional(),
  /**
   * a sparse file: the bytes of it no data region covers (tar's sparse map, or the source's unallocated bytes). A
   * restore that keeps sparse files checks that at least half of them came back unallocated (tree-verify.ts).
   * Absent for dense files, and in manifests made before sparse files were recorded.
   */
  holes: z.number().int().positive().optional(),
});
export type ManifestEntry = z.infer<typeof ManifestEntry>;

export const ManifestTotals = z.object({ files: z.number(), dirs: z.number(), symlinks: z.number(), bytes: z.number() });

/**
 * What a backup leaves out (container/archive/selection.ts has the rules): glob `excludes` (the same meaning for every
 * format), git's ignore rules, directories tagged with a CACHEDIR.TAG. It travels to the agent in the
 * SELECTION_HEADER of every request a backup makes, so each walk of the tree (tar's list, an image's, a delta's, a
 * manifest's) leaves out the same entries.
 */
export const SELECTION_HEADER = "x-snapflow-selection";
export const SelectionSpec = z.object({
  excludes: z.array(z.string().min(1, "an exclude pattern is not empty").max(256, "an exclude pattern is at most 256 characters")
    .refine((p) => !p.startsWith("!"), "negated patterns are not supported (gitignore: true applies git's own rules, negations included)")
    .refine((p) => !p.includes("\0") && !/(^|\/)\.\.(\/|$)/.test(p), "a pattern names paths inside the tree: no NUL, no '..'")).max(64, "at most 64 exclude patterns").default([]),
  gitignore: z.boolean().default(false),
  excludeCaches: z.boolean().default(false),
}).strict();
export type SelectionSpec = z.infer<typeof SelectionSpec>;

/** What a manifest says of its selection: the rules, and how many top-level paths each left out. */
export const SelectionRecord = SelectionSpec.extend({
  /** by rule ("exclude <pattern>", "gitignore", "CACHEDIR.TAG"): the paths it excluded (a directory with all below it counts once) */
  excluded: z.record(z.string(), z.number()),
  warnings: z.array(z.string()),
});
export type SelectionRecord = z.infer<typeof SelectionRecord>;

/** POST /v1/selection: compile a selection for a tree and answer its rules and warnings (the backup's probe asks). */
export const SelectionBody = z.object({ path: z.string(), selection: SelectionSpec }).strict();

/** Version 1 throughout: later fields are optional, so old manifests still parse and old readers ignore them. */
export const ManifestSchema = z.object({
  version: z.literal(1),
  entries: z.array(ManifestEntry),
  totals: ManifestTotals,
  /** a backup that left paths out: which rules, and how many each excluded (entries lists only what is in) */
  selection: SelectionRecord.optional(),
});
export type Manifest = z.infer<typeof ManifestSchema>;

/**
 * Version 2: a layer over a base snapshot's manifest, what an overlay delta stores, and a tar (changed-files) delta
 * too (archive/delta.ts deltaLayer: the entries that differ from the base's, its deletions as `removed`, no `opaque`;
 * its base may be a layer itself: ManifestSource's `under`). An overlay's lists only what the upper directory holds:
 * `entries` as the merged tree shows them (files hashed), `removed` the paths whose base entry and everything below it are gone (whiteouts), `opaque` the directories whose base contents are
 * all hidden. The tree's manifest is the base with the layer applied (manifest-layer.ts), made where it is read, so
 * a backup neither reads the base manifest nor walks the base image. `totals` are the whole tree's.
 */
export const LayerManifestSchema = z.object({
  version: z.literal(2),
  /** the snapshot whose manifest this layer applies to */
  base: z.string(),
  entries: z.array(ManifestEntry),
  removed: z.array(z.string()),
  opaque: z.array(z.string()),
  totals: ManifestTotals,
  /** a tar delta's selection (absent: the base's holds) */
  selection: SelectionRecord.optional(),
});
export type LayerManifest = z.infer<typeof LayerManifestSchema>;

export const VerifyBody = z.object({ path: z.string(), expected: ManifestSchema, limit: z.number().int().positive().max(1000).default(20) });

/**
 * A restore's "unless asked": give entries the owners (numeric uid/gid) and setuid/setgid bits the archive holds.
 * Off, they go to the agent's user and the bits are cleared (container/extract/sanitize-extracted.ts). Device nodes go
 * either way.
 */
export const Ownership = { keepOwnership: z.boolean().optional() };

const Sha256Hex = z.string().regex(/^[0-9a-f]{64}$/, "a SHA-256 in lowercase hex");
/** A stored manifest: its presigned GET, and its SHA-256 when the snapshot's record keeps one (checked on arrival). */
const StoredManifest = z.object({ url: z.string(), sha256: Sha256Hex.optional() }).strict();

/**
 * The longest chain of overlay deltas over one image (an overlay delta of an overlay delta…: a workspace slept and
 * woken again). Why 32: a wake downloads and extracts every delta of the chain before the tree answers, so its cost
 * grows with the chain's sum of changes (32 cycles of 10 MB: 320 MB, a third of the npm workspace's image), and its
 * verify fetches and applies each layer manifest in turn; the kernel's own bounds are far off (500 lower layers, and
 * the layers are named relative to their shared directory in one page of mount options). Past it a workspace is
 * backed up whole again (compaction, not built yet: docs/lifecycle.md).
 */
export const MAX_OVERLAY_CHAIN = 32;

/**
 * A manifest the agent reads itself: a file in the sandbox, or the store over a presigned GET (the Worker stays out
 * of the byte path). A layer (version 2) comes with its base's manifest, which the agent applies it to, and, in a
 * chain of overlay deltas, with the layers between (`under`, oldest first), applied to the base before it.
 */
export const ManifestSource = z.union([
  z.object({ file: z.string() }).strict(),
  StoredManifest.extend({ base: StoredManifest.optional(), under: z.array(StoredManifest).max(MAX_OVERLAY_CHAIN - 1).optional() }).strict(),
]);
export type ManifestSource = z.infer<typeof ManifestSource>;

export const VerifyTreeBody = z.object({
  path: z.string(),
  expected: ManifestSource,
  /** hash every file as well (today's /v1/verify); default: metadata only */
  deep: z.boolean().default(false),
  /** the restore kept owners and set-id bits: compare them too (else set-id bits are left out of the mode) */
  ...Ownership,
  /** compare sparse files' holes (tree-verify.ts); false where the materialization cannot show them */
  sparse: z.boolean().default(true),
  limit: z.number().int().positive().max(1000).default(20),
});

/** What a restore checks while extracting: the expected manifest, and whether this archive holds all of it. */
export const ExtractExpectation = {
  expected: ManifestSource.optional(),
  /** false for a delta layer: check only the entries it holds (default true) */
  complete: z.boolean().optional(),
  /** walk the result and compare metadata (default: = complete; a chain walks after its last layer) */
  walk: z.boolean().optional(),
};

/** A query parameter holding JSON (a ManifestSource with its base and layers does not fit in flat fields). */
const jsonQuery = <T extends z.ZodType>(schema: T) => z.preprocess((v) => {
  if (typeof v !== "string") return v;
  try {
    return JSON.parse(v);
  } catch {
    return v;
  }
}, schema);

const queryBool = z.preprocess((v) => (v === "true" ? true : v === "false" ? false : v), z.boolean());

/** A snapshot id, as a file name in the agent's area (manifest-kept.ts): no separators, no leading dot. */
const KeptId = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/, "a snapshot id (letters, digits, '.', '_', '-')");
/** A kept manifest asked for: the snapshot's id, and the SHA-256 its record keeps for its whole-tree manifest. */
const BaseKept = z.object({ id: KeptId, sha256: Sha256Hex }).strict();

/** Single-pass archive options (archive.ts archiveWithManifest). */
export const SinglePassFields = {
  /** write the manifest made from the tar stream here; turns the single pass on */
  manifestOut: z.string().optional(),
  /** with manifestOut: archive only what changed since this manifest (a delta) */
  base: ManifestSource.optional(),
  /** with base: compare the content of every file whose metadata agrees */
  rehash: z.boolean().optional(),
  /** with base: write a layer manifest (version 2) over this snapshot, the base, instead of the whole tree's */
  layerOver: z.string().optional(),
  /** with base: the base's whole-tree manifest as the agent may keep it (manifest-kept.ts), used instead of `base` when it has this SHA-256 */
  baseKept: BaseKept.optional(),
  /** keep the tree's whole manifest under this snapshot id, for the next delta */
  keepAs: KeptId.optional(),
};

/** `filesFrom`: a NUL-separated list (from /v1/delta) of the entries to archive, instead of the whole tree. */
export const ArchiveQuery = TarFormat.extend({
  path: z.string(),
  filesFrom: z.string().optional(),
  manifestOut: z.string().optional(),
  /** the base manifest of a delta, as a sandbox file or a presigned GET URL */
  baseFile: z.string().optional(),
  baseUrl: z.string().optional(),
  /** the base manifest as a ManifestSource in JSON: a layer with its base and the layers between (a delta of a delta) */
  baseSource: jsonQuery(ManifestSource).optional(),
  layerOver: z.string().optional(),
  baseKept: jsonQuery(BaseKept).optional(),
  keepAs: KeptId.optional(),
  rehash: queryBool.optional(),
  /** where the SinglePassResult JSON is written before the stream ends (the streamed response cannot carry it) */
  resultOut: z.string().optional(),
});
export const ArchiveToFile = z.object({ path: z.string(), output: z.string(), format: TarFormat, filesFrom: z.string().optional(), ...SinglePassFields });

export const DeltaBody = z.object({ path: z.string(), base: z.lazy(() => ManifestSchema), list: z.string(), rehash: z.boolean().optional() });

/**
 * POST /v1/overlay-layer: an overlay delta's layer manifest, from its upper directory alone (overlay-layer.ts).
 * `path` the overlay's merged tree, `upper` and `lower` its layers; `baseTotals` the base manifest's, from its record.
 */
export const OverlayLayerBody = z.object({
  path: z.string(), upper: z.string(), lower: z.string(),
  base: z.string(), baseTotals: ManifestTotals,
  /** where the layer manifest (JSON) is written */
  manifestOut: z.string(),
}).strict();
export interface OverlayLayerResult {
  /** the layer manifest file: its size and SHA-256 (the Worker binds the store's PUT to it) */
  manifest: { bytes: number; sha256: string; entries: number; removed: number; opaque: number; totals: z.infer<typeof ManifestTotals> };
  changedBytes: number;
  ms: number;
}
export const RemoveBody = z.object({ path: z.string(), entries: z.array(z.string()) });

export const ExtractQuery = TarFormat.extend({
  path: z.string(),
  expectedFile: z.string().optional(),
  expectedUrl: z.string().optional(),
  /** the expected manifest as a ManifestSource in JSON (a tar delta's layer, with the manifests below it) */
  expectedSource: jsonQuery(ManifestSource).optional(),
  complete: queryBool.optional(),
  walk: queryBool.optional(),
  keepOwnership: queryBool.optional(),
});
export const ExtractFile = z.object({ archive: z.string(), path: z.string(), format: TarFormat, ...ExtractExpectation, ...Ownership });

export const SplitBody = z.object({ path: z.string(), chunkBytes: z.number().int().min(1 << 20).max(1 << 30) });

export const HashUrlBody = z.object({ url: z.string() });
export const UploadBody = z.object({
  path: z.string(),
  url: z.string(),
  /** send If-None-Match: * (the Worker signed it into the URL: the PUT may only create the object) */
  createOnly: z.boolean().default(false),
});
export const DownloadBody = z.union([
  z.object({ url: z.string(), output: z.string() }).strict(),
  z.object({ url: z.string(), extract: z.object({ path: z.string(), format: TarFormat, ...ExtractExpectation, ...Ownership }) }).strict(),
]);

// ---- Parallel presigned transfers (presigned-multipart.ts, presigned-ranged.ts) ----
//   POST   /v1/upload-multipart  UploadMultipartBody  cut a tar stream or a staged file into equal parts, PUT each
//                                                     to its presigned UploadPart URL → {bytes, sha256, parts, ms, peakBufferedBytes}
//                                                     With source.archive.manifestOut: single pass, as GET /v1/archive
//                                                     (the walk names tar's entries; the manifest from the stream) → also {manifest}
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
       * directory order, which no manifest describes (a hard link may point either way).
       */
      z.object({ archive: z.object({ path: z.string(), format: TarFormat, manifestOut: z.string().optional() }).strict() }).strict(),
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
  /** single pass (source.archive.manifestOut): the manifest written there, made from the archive's own stream */
  manifest: z.object({ totals: ManifestTotals, entries: z.number().int().nonnegative(), jsonBytes: z.number().int().nonnegative(), walkMs: z.number().nonnegative() }).optional(),
});
export type UploadMultipartResult = z.infer<typeof UploadMultipartResult>;

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

// ---- Filesystem images, mounts and overlays (images.ts, mounts.ts, image-argv.ts) ----
//   POST   /v1/image        ImageBody        an image of the tree at `path` written to `output` → WrittenBytes;
//                                             with manifestOut → SinglePassResult & {onePass} (image-with-manifest.ts)
//   POST   /v1/materialize  MaterializeBody  an image file → a directory: extracted, or mounted read-only
//                                            (kernel, or FUSE) → {ms, bytes, mounted?}
//   POST   /v1/overlay      OverlayBody      a writable overlay over `lower` mounted at `path` → {upper, work, ms, mounted}
//   POST   /v1/overlay/opaque OverlayOpaqueBody  mark a restored upper's opaque directories, as its layer
//                                            manifest lists them → {marked, ms}
//   POST   /v1/overlay/stack OverlayStackBody  a read-only overlay of several lowers (a delta chain) → {ms, mounted}
//   GET    /v1/mounts                        the sandbox's mounts made through the agent → {mounts: MountEntry[]}
//   DELETE /v1/mounts?path=                  unmount (overlays on top of it first) → {unmounted: paths}
//   POST   /v1/clear        ClearBody        unmount what is mounted at each of `unmount` (nothing there is fine),
//                                            then delete each of `remove`: a retry's way cleared in one call
//                                            → {unmounted: paths, removed: number, ms}
// A mount needs an empty or missing `path`. DELETE /v1/sandbox unmounts the sandbox's mounts before deleting.

export const ImageBody = z.object({
  path: z.string(),
  output: z.string(),
  format: ImageFormat,
  /** the manifest goes here, made in the same read as the image where the format allows (answers SinglePassResult & {onePass}) */
  manifestOut: z.string().optional(),
});
export const MaterializeHow = z.enum(["extract", "mount-kernel", "mount-fuse"]);
export const MaterializeBody = z.object({ archive: z.string(), path: z.string(), format: ImageFormat, how: MaterializeHow, ...Ownership });
export const OverlayBody = z.object({
  lower: z.string(),
  path: z.string(),
  how: z.enum(["kernel", "fuse"]),
  /** an upper directory that already holds a layer (a restored overlay delta), kept as it is; its work dir is
   *  `${upper}.work`. Without it the overlay gets a fresh, empty layer under /snapflow/overlays/. */
  upper: z.string().optional(),
  /** the lower must be a mount point (a lazy image): once its mount is gone (an agent restart) the empty directory
   *  left is refused with a 404 naming `lower`, never laid under the overlay */
  lowerMounted: z.boolean().optional(),
});

/**
 * A restored overlay delta's upper directory, and its layer manifest (the snapshot's, over a presigned GET, checked
 * against the record's SHA-256): tar does not carry overlayfs' opaque mark, the manifest lists the directories that had it.
 */
export const OverlayOpaqueBody = z.object({ upper: z.string(), layer: StoredManifest }).strict();

/**
 * POST /v1/overlay/stack: a read-only overlay of several lower directories (`lowers`, topmost first: an overlay
 * delta chain's extracted layers, then its image's mount) mounted at `path`, which a writable overlay then uses as
 * its lower. The kernel reads the layers' whiteouts and opaque marks; nothing is written to them.
 */
export const OverlayStackBody = z.object({ path: z.string(), lowers: z.array(z.string()).min(2).max(MAX_OVERLAY_CHAIN + 1) }).strict();

/** Paths to clear before a mount is made again: unmounted in the order given, then deleted (never through a mount). */
export const ClearBody = z.object({ unmount: z.array(z.string()).max(16).default([]), remove: z.array(z.string()).max(16).default([]) }).strict();

/** A mount made through the agent, as GET /v1/mounts lists it (sandbox paths throughout). */
export interface MountEntry {
  path: string;
  /** lazy: the FUSE file a lazy restore's image is read from (snapflow-lazy), chunks fetched on first read */
  kind: "image" | "overlay" | "lazy";
  /** the image file, the overlay's lower directory, or a lazy mount's index */
  source: string;
  how: "mount-kernel" | "mount-fuse" | "kernel" | "fuse";
  /** the program that mounted it: mount, squashfuse_ll, squashfuse, erofsfuse, fuse-overlayfs, snapflow-lazy */
  tool: string;
  /** as /proc/self/mountinfo has it, e.g. squashfs, fuse.squashfuse_ll, overlay */
  fstype: string;
  /** ISO time of mounting */
  since: string;
  /** listing only: the mount's per-mount options as /proc/self/mountinfo shows them now (every mount has nosuid, nodev) */
  options?: string[];
  /** overlays: the writable layer and overlayfs's work directory */
  upper?: string;
  work?: string;
}

export interface MaterializeResult {
  ms: number;
  /** the image file's size */
  bytes: number;
  mounted?: MountEntry;
  /** erofs extract: names made hard links again after an extractor that copies them (erofs-links.ts) */
  relinked?: number;
}
// ---- end of filesystem images, mounts and overlays ----

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

/** status.json of a lazy mount (native/lazy/README.md), as the agent answers it. */
export interface LazyStatus {
  state: "mounting" | "ready" | "complete" | "stopped";
  prefetch: "pending" | "running" | "done" | "off";
  imageSha256: string;
  size: number;
  startedAt: string;
  readyMs: number;
  firstReadMs: number;
  completeMs: number;
  /** `read`: distinct chunks the mount has read from so far, whoever fetched them (what its readers needed) */
  chunks: { index: number; total: number; local: number; cached: number; onDemand: number; ahead: number; failed: number; read: number };
  bytes: { total: number; local: number; fetched: number; onDemand: number; ahead: number; read: number };
  fetchAttempts: number;
  onDemandChunks: { index: number; sha256: string; atMs: number }[];
  failed: { index: number; sha256: string; reason: string; attempts: number; atMs: number }[];
}
// ---- end of chunks and lazy mounts ----
/** A restore's swap (tree-swap.ts): the target it restores into and the restore's id, which names its journal and trees. */
export const SwapBody = z.object({
  target: z.string(),
  id: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/, "a restore id is 1–128 of A-Z, a-z, 0-9, '.', '_' and '-'"),
});

/**
 * A tree the swap lays at the target itself, right after it: the image from a lazy mount whose helper still serves
 * (LazyRemountBody without its path), or an overlay over a lower that must still be mounted (OverlayBody with
 * `lowerMounted`). One call instead of two on the way to usable.
 */
export const SwapMount = z.discriminatedUnion("kind", [
  z.object({ kind: z.literal("lazy-image"), work: z.string(), format: SquashfsFormat }).strict(),
  z.object({ kind: z.literal("overlay"), lower: z.string(), upper: z.string(), how: z.enum(["kernel", "fuse"]) }).strict(),
]);

/**
 * `mount`: nothing is built beside the target, because the tree is a mount: an empty directory goes in for it, and
 * the agent mounts it at the target. What it mounts over must still be there (an agent restart takes it): else a
 * 404 naming `mount.work` or `mount.lower`, with the swap done (repeating the call repeats only the mount).
 */
export const SwapInBody = SwapBody.extend({ mount: SwapMount.optional() });

/** A swap's journal (tree-swap.ts): how far the swap of a restore's new tree into its target got. */
export type SwapState = "staging" | "swapping" | "swapped" | "committed";

export interface SwapJournal {
  id: string;
  /** sandbox paths */
  target: string;
  staged: string;
  old: string;
  state: SwapState;
  /** recorded before the first rename: whether there was a tree at the target to keep */
  hadTarget?: boolean;
  /** sandbox paths of snapflow mounts taken down at the target when the new tree went in */
  unmounted?: string[];
  startedAt: string;
  updatedAt: string;
}

/** POST /v1/sweep: remove what runs older than this left (default: sweep.ts SWEEP_OLDER_THAN_MS). */
export const SweepBody = z.object({ olderThanSeconds: z.number().int().min(0).optional() });

export const FaultBody = z.object({
  /** the route the fault applies to, e.g. "POST /v1/archive" */
  route: z.string(),
  /** how many of the next matching requests fail with a 503 (fail), or answer with a lie (lie) */
  times: z.number().int().positive().max(100),
  /** lie: only routes that have a lie to tell use it (POST /v1/upload-multipart: parts other than those hashed are sent) */
  action: z.enum(["fail", "lie"]).default("fail"),
});

/** What the agent answers for a file it wrote or an archive it made. */
export interface WrittenBytes {
  bytes: number;
  sha256: string;
  ms: number;
}

// ---- Shapes the agent answers with (types only; the agent makes them, the Worker reads them). ----

export interface Difference {
  path: string;
  kind: "missing" | "extra" | "changed";
  fields?: { name: string; expected: unknown; actual: unknown }[];
}

export interface Comparison {
  equal: boolean;
  counts: { missing: number; extra: number; changed: number };
  /** the first differences, in path order */
  differences: Difference[];
}

/**
 * Every tool a strategy may drive, with the Debian package that installs it (the Dockerfile installs all); pkg null:
 * built from this repository (native/), copied into the image by its own Dockerfile stage and put on the host
 * agent's PATH by the local stack.
 */
export const TOOLS = {
  tar: { pkg: "tar", version: ["--version"] },
  zstd: { pkg: "zstd", version: ["--version"] },
  gzip: { pkg: "gzip", version: ["--version"] },
  pigz: { pkg: "pigz", version: ["--version"] },
  lz4: { pkg: "lz4", version: ["--version"] },
  mksquashfs: { pkg: "squashfs-tools", version: ["-version"] },
  // squashfs from a tar stream, so an image backup reads the tree once (image-with-manifest.ts); optional
  tar2sqfs: { pkg: "squashfs-tools-ng", version: ["--version"] },
  // prints its version and exits 1 (squashfs-tools 4.5): the probe reads what a tool prints, whatever its status
  unsquashfs: { pkg: "squashfs-tools", version: ["-version"] },
  squashfuse: { pkg: "squashfuse", version: ["--version"] },
  squashfuse_ll: { pkg: "squashfuse", version: ["--version"] },
  "fuse-overlayfs": { pkg: "fuse-overlayfs", version: ["--version"] },
  fusermount3: { pkg: "fuse3", version: ["--version"] },
  // No --version before erofs-utils 1.8 (Debian 12 has 1.5, Ubuntu 22.04 1.4). mkfs.erofs prints "mkfs.erofs 1.x"
  // before it parses its options since 1.4 (then refuses -V, exit 1) and answers -V since 1.8; fsck.erofs has -V.
  "mkfs.erofs": { pkg: "erofs-utils", version: ["-V"] },
  "fsck.erofs": { pkg: "erofs-utils", version: ["-V"] },
  curl: { pkg: "curl", version: ["--version"] },
  aria2c: { pkg: "aria2", version: ["--version"] },
  // snapflow's release and the Go that built it (native/lazy/cmd/snapflow-lazy/version.go)
  "snapflow-lazy": { pkg: null, version: ["version"] },
} as const satisfies Record<string, { pkg: string | null; version: string[] }>;
export type ToolName = keyof typeof TOOLS;

/**
 * snapflow's release (package.json "version"; test/node/probe-versions-unit.test.ts keeps them equal). The agent
 * reports the one it was built with and the Worker compares it with its own (`snapflow doctor`): an image built from
 * another release answers another protocol.
 */
export const SNAPFLOW_RELEASE = "0.1.0";

export interface ProbeResult {
  /** the agent's build: absent from agents older than the field */
  agent?: { release: string };
  kernel: string;
  filesystems: string[];
  fuse: boolean;
  capSysAdmin: boolean;
  root: boolean;
  tools: Record<string, { path: string; version: string } | null>;
  cpus: number;
  memory: { totalBytes: number; freeBytes: number };
  disk: { path: string; freeBytes: number; totalBytes: number };
  runtime: string;
}

