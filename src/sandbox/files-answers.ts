// The agent's answers about the file-level format (POST /v1/files/pack, /v1/files/unpack), as the Worker parses them
// before acting on them: every count a non-negative integer, every digest 64 hex characters, every pack name a
// snapshot id (pack-keys.ts makes keys of them), part ETags safe to put in a completion body.
import { z } from "zod";
import { FilesUnpackResult, UploadMultipartResult } from "../../container/contract/protocol.ts";
import { PACK_NAME } from "../chunks/pack-keys.ts";

const count = z.number().int().nonnegative();
const SHA256 = z.string().regex(/^[0-9a-f]{64}$/);
const Totals = z.object({ files: count, dirs: count, symlinks: count, bytes: count });
const PackRef = z.object({ name: z.string().regex(PACK_NAME), bytes: count });

export const FilesPackAnswer = z.object({
  entries: count,
  totals: Totals,
  jsonBytes: count,
  jsonSha256: SHA256,
  walkMs: z.number().nonnegative(),
  ms: z.number().nonnegative(),
  index: z.object({ bytes: count, sha256: SHA256, chunks: count }),
  /** this backup's pack, when it had new chunks */
  pack: PackRef.extend({ sha256: SHA256 }).nullable(),
  /** every pack the index names */
  packs: z.array(PackRef).max(100_000),
  parts: z.array(UploadMultipartResult.shape.parts.element).max(10_000),
  peakBufferedBytes: count.optional(),
  read: z.object({ files: count, bytes: count }),
  reused: z.object({ files: count, bytes: count }),
  newChunks: count,
  newBytes: count,
  /** where the parent's index came from: the sandbox's kept copy, or the store */
  baseFrom: z.enum(["file", "url"]).optional(),
});
export type FilesPackAnswer = z.infer<typeof FilesPackAnswer>;

/** The engine's extract restore answers as the agent's protocol says (the route parsed it; the Worker parses it again). */
export const FilesUnpackAnswer = FilesUnpackResult;
export type FilesUnpackAnswer = z.infer<typeof FilesUnpackAnswer>;
