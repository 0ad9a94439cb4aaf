// The extract restore of the file-level format (issue 24): a tree made from a snapshot's index and its packs by the
// native engine (`snapflow-lazy files-unpack`, native/lazy/internal/filecas). Part of the agent's protocol
// (../protocol.ts re-exports every part): both sides import it.
//
//   POST   /v1/files/unpack  FilesUnpackBody  make the index's tree at `path` (empty or absent), every chunk checked
//                                             against its name before it is written, every file against its entry,
//                                             then (walk) the tree's metadata against the index → FilesUnpackResult;
//                                             a tree that differs is 422 verify_failed naming the first differences
import { z } from "zod";
import { PACK_NAME } from "./filecas-pack.ts";
import { IndexChain, Sha256Hex } from "./trees.ts";


export const FilesUnpackBody = z
  .object({
    /** where the tree is made: a directory that is empty or not there yet (a swap's new tree, say) */
    path: z.string(),
    /** the index: a file in the sandbox, or the store's object with the SHA-256 its record keeps; a layer's chain beneath it */
    index: z.union([
      z.object({ file: z.string(), sha256: Sha256Hex.optional(), chain: IndexChain.optional() }).strict(),
      z.object({ url: z.string(), sha256: Sha256Hex, chain: IndexChain.optional() }).strict(),
    ]),
    /** a presigned GET URL for each pack the index's chunks lie in, by the pack's name */
    packs: z.record(PACK_NAME, z.string()),
    /** keep the index's owners and files' set-id bits (the restore's keepOwnership) */
    keepOwners: z.boolean().default(false),
    /** walk the made tree and compare its metadata with the index (a restore that is checked: the default) */
    walk: z.boolean().default(true),
    /** Range GETs in flight */
    concurrency: z.number().int().min(1).max(32).default(4),
    /**
     * where the made tree's stat keys are kept (a file in the sandbox, with index.sha256): the next file-level backup
     * of this tree takes them with the index as its base, and reads only what changed since (filecas/stats.go)
     */
    statsOut: z.string().optional(),
    /**
     * the snapshot's manifest (a presigned GET and the SHA-256 its record keeps): every index entry must agree with
     * it before anything is made, so the tree made and checked against the index is the manifest's (filecas/agree.go)
     */
    manifest: z.object({ url: z.string(), sha256: Sha256Hex }).strict().optional(),
  })
  .strict();

const count = z.number().int().nonnegative();
const Difference = z.object({
  path: z.string(),
  kind: z.enum(["missing", "extra", "changed"]),
  fields: z.array(z.object({ name: z.string(), expected: z.unknown(), actual: z.unknown() })).optional(),
});

/** What the engine answers (cmd/snapflow-lazy/files_unpack.go), and the route with it once the tree is equal. */
export const FilesUnpackResult = z.object({
  /** the index's entries, files made (hard links not counted), their bytes */
  entries: count,
  files: count,
  bytes: count,
  /** distinct chunks fetched and checked; HTTP requests made (resumes included); coalesced ranges planned */
  chunks: count,
  requests: count,
  ranges: count,
  /** bytes the requests brought (the chunks' stored bytes and the gaps read between them) */
  fetchedBytes: count,
  /** bytes hashed by reading them back: chunks that came before their turn in their file */
  rereadBytes: count,
  equal: z.boolean(),
  counts: z.object({ missing: count, extra: count, changed: count }),
  differences: z.array(Difference),
  walked: z.object({ entries: count, ms: count, owners: z.enum(["compared", "not-in-manifest"]).optional(), sparse: z.literal("compared").optional() }).optional(),
  indexMs: count,
  /** files whose stat keys were written to statsOut */
  stats: count.optional(),
  /** every index entry agreed with the manifest asked for, before anything was made */
  manifestAgreed: z.boolean().optional(),
  ms: count,
});
export type FilesUnpackResult = z.infer<typeof FilesUnpackResult>;
