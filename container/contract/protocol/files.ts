// Bodies that name a path, and the generated datasets (POST /v1/datasets).
// Part of the agent's protocol (../protocol.ts re-exports every part): both sides import it.
import { z } from "zod";

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
