// The content check of a file-level tree served from its index (a wake: files-overlay-restore), by the native engine
// (`snapflow-lazy files-check`). Part of the agent's protocol (../protocol.ts re-exports every part).
//
//   POST   /v1/files/check  FilesCheckBody  each regular file the snapshot's index names (layerOnly: each its own
//                                           layer sets) opened beneath `path` without following a symlink, hashed
//                                           and compared with the index's size and SHA-256 → FilesCheckResult
//                                           (equal, or the differences: 200 either way, the caller decides)
//
// Metadata is not compared: the tree is the index served as it is. A snapshot whose index is a layer over one
// already checked needs only its layer's files hashed: the rest are the index beneath's (filecas/layer.go).
import { z } from "zod";
import { IndexChain, Sha256Hex } from "./trees.ts";

export const FilesCheckBody = z
  .object({
    /** the tree: a wake's target */
    path: z.string(),
    /** the snapshot's index in the store, with the SHA-256 its record keeps, and its chain beneath it */
    index: z.object({ url: z.string(), sha256: Sha256Hex, chain: IndexChain.optional() }).strict(),
    /** hash only the names the snapshot's own layer sets (its index must be a layer: 400 naming layerOnly otherwise) */
    layerOnly: z.boolean().default(false),
    /** how many differences the answer names (all are counted) */
    limit: z.number().int().min(1).max(1000).default(20),
  })
  .strict();

const count = z.number().int().nonnegative();

/** What the engine answers (cmd/snapflow-lazy/files_check.go). */
export const FilesCheckResult = z.object({
  equal: z.boolean(),
  /** files hashed and their bytes; the composed index's entries */
  files: count,
  bytes: count,
  entries: count,
  layerOnly: z.boolean(),
  counts: z.object({ missing: count, changed: count }),
  differences: z.array(z.object({ path: z.string(), kind: z.enum(["missing", "changed"]), field: z.string().optional(), expected: z.unknown(), actual: z.unknown() })),
  indexMs: count,
  ms: count,
});
export type FilesCheckResult = z.infer<typeof FilesCheckResult>;
