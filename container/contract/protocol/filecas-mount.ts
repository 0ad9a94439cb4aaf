import { z } from "zod";
import { PACK_NAME } from "./filecas-pack.ts";
import { IndexChain, Sha256Hex } from "./trees.ts";
import { ClearBody } from "./images.ts";

// The lazy restore from a file-level index (issue 24; native/lazy/internal/filesfs):
//   POST   /v1/files/mount    FilesMountBody   serve the index's tree read-only at `mountpoint` over FUSE (snapflow-lazy
//                                              files-mount): it answers once the tree does, before its content is
//                                              fetched; each chunk is fetched by a Range GET of its pack, checked
//                                              against its SHA-256, cached, and the rest prefetched → FilesMountResult
// The mount is listed and undone by GET/DELETE /v1/mounts like any other (kind "lazy", its source the index);
// POST /v1/lazy/wait with the answer's `work` waits for it to be complete.


/** A pack's name: the id of the snapshot whose backup wrote it (internal/filecas format.go packName). */

export const FilesMountBody = z.object({
  /**
   * the index file in the sandbox, and its SHA-256 as the snapshot's record keeps it (checked as it is read); with
   * `url` (a presigned GET of the index object, on the store's origin) the helper fetches it itself, checks it, and
   * keeps it at `file`: no round trip through the agent between the store and the decoder
   */
  index: z.object({ file: z.string(), sha256: Sha256Hex, url: z.string().optional(), chain: IndexChain.optional() }).strict()
    .refine((i) => !i.chain?.length || i.url !== undefined, { path: ["chain"], message: "a layer's chain is fetched by the helper: it needs url too" }),
  /** a presigned GET URL per pack the index names (each on the store's origin) */
  urls: z.record(PACK_NAME, z.string()),
  /** where the tree appears: an empty or missing directory */
  mountpoint: z.string(),
  /** the mount's work directory (its URL and status files; POST /v1/lazy/wait takes it): default, a new one under the sandbox's lazy directory */
  work: z.string().optional(),
  /** the chunk cache (default: the sandbox's, shared by its lazy mounts) */
  cache: z.string().optional(),
  /** parallel background Range GETs; 0 fetches on demand only */
  prefetch: z.number().int().min(0).max(64).default(16),
  /** what an earlier attempt may have left, cleared first as POST /v1/clear would (a round trip fewer) */
  clear: ClearBody.optional(),
}).strict();
export type FilesMountBody = z.infer<typeof FilesMountBody>;

export interface FilesMountResult {
  ms: number;
  /** exec → the helper's ready line, as the agent saw it; readyMs: the helper's own */
  fuseMs: number;
  readyMs: number;
  entries: number;
  chunks: number;
  /** chunks already in the cache (a fork's restore reuses its parent's) */
  local: number;
  /** this mount's own directory (its URL and status files): POST /v1/lazy/wait takes it */
  work: string;
  status: string;
  mounted: { path: string; kind: "lazy"; source: string; how: "fuse"; tool: string; fstype: string; since: string };
}
