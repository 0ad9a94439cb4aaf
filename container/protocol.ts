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
//   GET    /v1/files?path=                 a file's raw bytes (Content-Length set)
//   PUT    /v1/files?path=                 request body → file
//   DELETE /v1/files?path=                 remove a file or tree
//   PUT    /v1/extract?     ExtractQuery   request body (an archive) piped into the extractor
//   POST   /v1/extract      ExtractFile    extract an archive file in the sandbox
//   POST   /v1/faults       FaultBody      test-only, when the agent runs with SNAPFLOW_AGENT_FAULTS=1
//   DELETE /v1/sandbox                     host agent only: drop this sandbox's root directory
//
// Every request but health carries `authorization: Bearer <token>`; a host agent serving many sandboxes also
// needs `x-snapflow-sandbox: <id>`.
import { z } from "zod";

export const SANDBOX_HEADER = "x-snapflow-sandbox";
export const SANDBOX_ID = z.string().regex(/^[a-z0-9][a-z0-9-]{0,62}$/, "a sandbox id is 1–63 of a-z, 0-9 and '-'");

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

export const PathBody = z.object({ path: z.string() });

export const DatasetBody = z.object({
  path: z.string(),
  kind: z.enum(["node-modules", "tricky"]),
  seed: z.number().int().nonnegative().default(1),
  files: z.number().int().positive().max(2_000_000).optional(),
  bytes: z.number().int().nonnegative().max(64 * 2 ** 30).optional(),
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
