// The agent's HTTP protocol: every JSON body and query that crosses into the agent, as zod schemas. The Worker
// imports the same schemas, so the two sides cannot drift apart.
//
//   GET    /v1/health                      liveness, no token
//   GET    /v1/probe                       what this sandbox can do (tools, filesystems, fuse, caps, cpu, memory, disk)
//   POST   /v1/datasets     DatasetBody    generate a deterministic dataset at `path`
//   POST   /v1/manifest     PathBody       manifest of a tree
//   POST   /v1/verify       VerifyBody     compare a tree with an expected manifest
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

export const ArchiveQuery = TarFormat.extend({ path: z.string() });
export const ArchiveToFile = z.object({ path: z.string(), output: z.string(), format: TarFormat });

export const ExtractQuery = TarFormat.extend({ path: z.string() });
export const ExtractFile = z.object({ archive: z.string(), path: z.string(), format: TarFormat });

export const SplitBody = z.object({ path: z.string(), chunkBytes: z.number().int().min(1 << 20).max(1 << 30) });

export const UploadBody = z.object({ path: z.string(), url: z.string() });
export const DownloadBody = z.union([
  z.object({ url: z.string(), output: z.string() }).strict(),
  z.object({ url: z.string(), extract: z.object({ path: z.string(), format: TarFormat }) }).strict(),
]);

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

