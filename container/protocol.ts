// The agent's HTTP protocol: every JSON body and query that crosses into the agent, as zod schemas. The Worker
// imports the same schemas, so the two sides cannot drift apart.
//
//   GET    /v1/health                      liveness, no token
//   GET    /v1/probe                       what this sandbox can do (tools, filesystems, fuse, caps, cpu, memory, disk)
//   POST   /v1/drop-caches                 sync and drop the page cache when permitted → {dropped, ms, reason?}
//   POST   /v1/datasets     DatasetBody    generate a deterministic dataset at `path`
//   POST   /v1/manifest     PathBody       manifest of a tree
//   POST   /v1/verify       VerifyBody     compare a tree with an expected manifest
//   POST   /v1/delta        DeltaBody      changed entries since a base manifest → list file; deleted paths
//   POST   /v1/remove       RemoveBody     remove relative entries below a tree (applying a delta's deletions)
//   GET    /v1/archive?     ArchiveQuery   the tree as an archive, streamed as the response body
//   POST   /v1/archive      ArchiveToFile  the tree as an archive written to a file in the sandbox
//   GET    /v1/stat?path=                  {exists, type, size, entries}
//   GET    /v1/files?path=                 a file's raw bytes (Content-Length set); &encoding=base64 (JSON) or
//                                          base64-sse (events) reproduce the SDK file API for the baselines
//   POST   /v1/split        SplitBody      cut a file into chunk files (the chunked baseline)
//   PUT    /v1/files?path=                 request body → file
//   DELETE /v1/files?path=                 remove a file or tree
//   PUT    /v1/extract?     ExtractQuery   request body (an archive) piped into the extractor
//   POST   /v1/extract      ExtractFile    extract an archive file in the sandbox
//   POST   /v1/hash-url     HashUrlBody    GET a presigned URL to the end and hash it (verifies a stored archive)
//   POST   /v1/upload       UploadBody     PUT a file in the sandbox to a presigned URL
//   POST   /v1/download     DownloadBody   GET a presigned URL into a file, or piped into the extractor
//   POST   /v1/faults       FaultBody      test-only, when the agent runs with SNAPFLOW_AGENT_FAULTS=1
//   DELETE /v1/sandbox                     host agent only: drop this sandbox's root directory
//
// Every request but health carries `authorization: Bearer <token>`; a host agent serving many sandboxes also
// needs `x-snapflow-sandbox: <id>`.
import { z } from "zod";

export const SANDBOX_HEADER = "x-snapflow-sandbox";
export const SANDBOX_ID = z.string().regex(/^[a-z0-9][a-z0-9-]{0,62}$/, "a sandbox id is 1–63 of a-z, 0-9 and '-'");

/** Roots a sandbox path may live under; the agent maps them below the sandbox's root directory. */
export const ALLOWED_ROOTS = ["/workspace", "/snapflow"] as const;

/**
 * Checks a sandbox path's syntax and returns it normalised: absolute, no '..' segment, inside an allowed root.
 * Pure, so the Worker can refuse a bad path with a 400 before anything starts. (Symlink escapes can only be
 * seen inside the sandbox: sandbox-paths.ts checks those.)
 */
export function normalizeSandboxPath(path: string): { ok: true; path: string } | { ok: false; reason: string; outside: boolean } {
  if (path.length === 0) return { ok: false, reason: "is empty", outside: false };
  if (path.includes("\0")) return { ok: false, reason: "contains a NUL byte", outside: false };
  if (!path.startsWith("/")) return { ok: false, reason: `must be an absolute sandbox path like /workspace/app, got '${path}'`, outside: false };
  const segments = path.split("/").filter((x) => x !== "" && x !== ".");
  if (segments.includes("..")) return { ok: false, reason: `must not contain '..' segments: '${path}'`, outside: true };
  const normal = "/" + segments.join("/");
  if (!ALLOWED_ROOTS.some((root) => normal === root || normal.startsWith(root + "/"))) {
    return { ok: false, reason: `'${path}' is outside the sandbox's allowed roots (${ALLOWED_ROOTS.join(", ")})`, outside: true };
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

export const PathBody = z.object({ path: z.string() });

export const DatasetBody = z.object({
  path: z.string(),
  kind: z.enum(["node-modules", "tricky", "added-data"]),
  seed: z.number().int().nonnegative().default(1),
  files: z.number().int().positive().max(2_000_000).optional(),
  bytes: z.number().int().nonnegative().max(64 * 2 ** 30).optional(),
  /** added-data: incompressible bytes on top of the node-modules base (the seed's 10 MB … 5 GB) */
  addedBytes: z.number().int().nonnegative().max(64 * 2 ** 30).optional(),
  /** remove whatever is at `path` first */
  replace: z.boolean().default(true),
});
export type DatasetBody = z.infer<typeof DatasetBody>;

const ManifestEntry = z.object({
  path: z.string(),
  type: z.enum(["file", "dir", "symlink", "other"]),
  mode: z.number().int(),
  size: z.number().int(),
  mtime: z.number().int(),
  target: z.string().optional(),
  sha256: z.string().optional(),
  link: z.string().optional(),
});
export const ManifestSchema = z.object({
  version: z.literal(1),
  entries: z.array(ManifestEntry),
  totals: z.object({ files: z.number(), dirs: z.number(), symlinks: z.number(), bytes: z.number() }),
});

export const VerifyBody = z.object({ path: z.string(), expected: ManifestSchema, limit: z.number().int().positive().max(1000).default(20) });

/** `filesFrom`: a NUL-separated list (from /v1/delta) of the entries to archive, instead of the whole tree. */
export const ArchiveQuery = TarFormat.extend({ path: z.string(), filesFrom: z.string().optional() });
export const ArchiveToFile = z.object({ path: z.string(), output: z.string(), format: TarFormat, filesFrom: z.string().optional() });

export const DeltaBody = z.object({ path: z.string(), base: z.lazy(() => ManifestSchema), list: z.string() });
export const RemoveBody = z.object({ path: z.string(), entries: z.array(z.string()) });

export const ExtractQuery = TarFormat.extend({ path: z.string() });
export const ExtractFile = z.object({ archive: z.string(), path: z.string(), format: TarFormat });

export const SplitBody = z.object({ path: z.string(), chunkBytes: z.number().int().min(1 << 20).max(1 << 30) });

export const HashUrlBody = z.object({ url: z.string() });
export const UploadBody = z.object({ path: z.string(), url: z.string() });
export const DownloadBody = z.union([
  z.object({ url: z.string(), output: z.string() }).strict(),
  z.object({ url: z.string(), extract: z.object({ path: z.string(), format: TarFormat }) }).strict(),
]);

// ---- Parallel presigned transfers (presigned-multipart.ts, presigned-ranged.ts) ----
//   POST   /v1/upload-multipart  UploadMultipartBody  cut a tar stream or a staged file into equal parts, PUT each
//                                                     to its presigned UploadPart URL → {bytes, sha256, parts, ms, peakBufferedBytes}
//   POST   /v1/download-ranged   DownloadRangedBody   parallel Range GETs of one presigned URL into a file or, in
//                                                     order, into the extractor → {bytes, sha256, ms, tool, ranges?, peakBufferedBytes?}

/** R2's multipart rules (as src/store/multipart-upload.ts): parts ≥ 5 MiB except the last, ≤ 10,000 parts, ≤ 5 GiB. */
export const MULTIPART_LIMITS = { minPartBytes: 5 * 2 ** 20, maxPartBytes: 5 * 2 ** 30, maxParts: 10_000 } as const;
/** The agent holds at most (concurrency + 1) × partSize bytes of an upload; refuse requests that would exceed this. */
export const MULTIPART_MAX_BUFFER_BYTES = 2 * 2 ** 30;

export const UploadMultipartBody = z
  .object({
    source: z.union([
      /** tar (+ compressor) of the tree at `path`, exactly as POST /v1/archive makes it, cut while it streams */
      z.object({ archive: z.object({ path: z.string(), format: TarFormat }).strict() }).strict(),
      /** a staged file in the sandbox */
      z.object({ file: z.string() }).strict(),
    ]),
    /** bytes of every part but the last; R2 needs ≥ 5 MiB */
    partSize: z.number().int().min(MULTIPART_LIMITS.minPartBytes, `must be at least 5 MiB (${MULTIPART_LIMITS.minPartBytes} bytes), R2's minimum part size`).max(MULTIPART_LIMITS.maxPartBytes),
    /** parts PUT at once */
    concurrency: z.number().int().min(1).max(64).default(4),
    /** urls[i]: the presigned UploadPart URL (partNumber=i+1&uploadId=...) of part i + 1 */
    urls: z.array(z.string()).min(1).max(MULTIPART_LIMITS.maxParts),
    /** extra attempts per part on a network error, 5xx or 429 */
    retries: z.number().int().min(0).max(10).default(2),
  })
  .strict()
  .refine((b) => (b.concurrency + 1) * b.partSize <= MULTIPART_MAX_BUFFER_BYTES, {
    path: ["partSize"],
    message: `(concurrency + 1) × partSize must stay within ${MULTIPART_MAX_BUFFER_BYTES} bytes of agent memory`,
  });
export type UploadMultipartBody = z.infer<typeof UploadMultipartBody>;

export const DownloadRangedBody = z
  .object({
    url: z.string(),
    /** the object's size (the Worker HEADs it); every 206's Content-Range total must equal it */
    size: z.number().int().nonnegative(),
    output: z.string().optional(),
    extract: z.object({ path: z.string(), format: TarFormat }).strict().optional(),
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
//   POST   /v1/image        ImageBody        an image of the tree at `path` written to `output` → WrittenBytes
//   POST   /v1/materialize  MaterializeBody  an image file → a directory: extracted, or mounted read-only
//                                            (kernel, or FUSE) → {ms, bytes, mounted?}
//   POST   /v1/overlay      OverlayBody      a writable overlay over `lower` mounted at `path` → {upper, work, ms, mounted}
//   GET    /v1/mounts                        the sandbox's mounts made through the agent → {mounts: MountEntry[]}
//   DELETE /v1/mounts?path=                  unmount (overlays on top of it first) → {unmounted: paths}
// A mount needs an empty or missing `path`. DELETE /v1/sandbox unmounts the sandbox's mounts before deleting.

export const ImageBody = z.object({ path: z.string(), output: z.string(), format: ImageFormat });
export const MaterializeHow = z.enum(["extract", "mount-kernel", "mount-fuse"]);
export const MaterializeBody = z.object({ archive: z.string(), path: z.string(), format: ImageFormat, how: MaterializeHow });
export const OverlayBody = z.object({
  lower: z.string(),
  path: z.string(),
  how: z.enum(["kernel", "fuse"]),
  /** an upper directory that already holds a layer (a restored overlay delta), kept as it is; its work dir is
   *  `${upper}.work`. Without it the overlay gets a fresh, empty layer under /snapflow/overlays/. */
  upper: z.string().optional(),
});

/** A mount made through the agent, as GET /v1/mounts lists it (sandbox paths throughout). */
export interface MountEntry {
  path: string;
  kind: "image" | "overlay";
  /** the image file, or the overlay's lower directory */
  source: string;
  how: "mount-kernel" | "mount-fuse" | "kernel" | "fuse";
  /** the program that mounted it: mount, squashfuse_ll, squashfuse, erofsfuse, fuse-overlayfs */
  tool: string;
  /** as /proc/self/mountinfo has it, e.g. squashfs, fuse.squashfuse_ll, overlay */
  fstype: string;
  /** ISO time of mounting */
  since: string;
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

export const FaultBody = z.object({
  /** the route the fault applies to, e.g. "POST /v1/archive" */
  route: z.string(),
  /** how many of the next matching requests fail with a 503 */
  times: z.number().int().positive().max(100),
});

/** What the agent answers for a file it wrote or an archive it made. */
export interface WrittenBytes {
  bytes: number;
  sha256: string;
  ms: number;
}

// ---- Shapes the agent answers with (types only; the agent makes them, the Worker reads them). ----

export type EntryType = "file" | "dir" | "symlink" | "other";

export interface ManifestEntry {
  /** relative to the tree's root, '/'-separated; the root itself is not listed */
  path: string;
  type: EntryType;
  /** permission bits (mode & 0o7777) */
  mode: number;
  size: number;
  /** seconds since the epoch, floored */
  mtime: number;
  target?: string;
  sha256?: string;
  /** for the second and later names of a hard-linked file: the first name (in walk order) */
  link?: string;
}

export interface Manifest {
  version: 1;
  entries: ManifestEntry[];
  totals: { files: number; dirs: number; symlinks: number; bytes: number };
}

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

/** Every tool a strategy may drive, with the Debian package that installs it (the Dockerfile installs all). */
export const TOOLS = {
  tar: { pkg: "tar", version: ["--version"] },
  zstd: { pkg: "zstd", version: ["--version"] },
  gzip: { pkg: "gzip", version: ["--version"] },
  pigz: { pkg: "pigz", version: ["--version"] },
  lz4: { pkg: "lz4", version: ["--version"] },
  mksquashfs: { pkg: "squashfs-tools", version: ["-version"] },
  unsquashfs: { pkg: "squashfs-tools", version: ["-version"] },
  squashfuse: { pkg: "squashfuse", version: ["--version"] },
  squashfuse_ll: { pkg: "squashfuse", version: ["--version"] },
  "fuse-overlayfs": { pkg: "fuse-overlayfs", version: ["--version"] },
  fusermount3: { pkg: "fuse3", version: ["--version"] },
  "mkfs.erofs": { pkg: "erofs-utils", version: ["--version"] },
  "fsck.erofs": { pkg: "erofs-utils", version: ["--version"] },
  curl: { pkg: "curl", version: ["--version"] },
  aria2c: { pkg: "aria2", version: ["--version"] },
} as const satisfies Record<string, { pkg: string; version: string[] }>;
export type ToolName = keyof typeof TOOLS;

export interface ProbeResult {
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

