// Which file-level snapshot a sandbox's tree at a path last came from or went to: the parent of its next file-level
// backup (files-parent.ts). A file-level backup sets it when it is recorded, and so does a file-level restore (the
// tree it made is that snapshot's, and the sandbox keeps the restored tree's stat keys beside it, so the next backup
// there reads only what changed since). One small object per sandbox and path, overwritten: the store is strongly
// consistent where KV is not, and a pointer to a deleted snapshot only means "no parent".
//
//   files-lineage/<sandbox id>/<SHA-256 of the path, 32 hex>.json   {snapshotId, at, by: "backup" | "restore"}
import { z } from "zod";
import type { Deps } from "../deps.ts";
import { SANDBOX_ID } from "../../container/contract/protocol.ts";
import { getJson, putJson } from "./records.ts";
import { pathDigest } from "./target-leases.ts";

async function lineageKey(sandboxId: string, path: string): Promise<string> {
  const id = SANDBOX_ID.parse(sandboxId);
  return `files-lineage/${id}/${await pathDigest(path)}.json`;
}

const Lineage = z.object({ snapshotId: z.string().regex(/^[a-z]{2}-\d{14}-[0-9a-f]{8}$/), at: z.string(), by: z.enum(["backup", "restore"]) });

export async function setFilesLineage(d: Deps, sandboxId: string, path: string, snapshotId: string, by: "backup" | "restore"): Promise<void> {
  await putJson(d.store, await lineageKey(sandboxId, path), { snapshotId, at: new Date().toISOString(), by });
}

/** The snapshot the tree at (sandbox, path) last came from or went to, or undefined. */
export async function filesLineage(d: Deps, sandboxId: string, path: string): Promise<z.infer<typeof Lineage> | undefined> {
  const parsed = Lineage.safeParse(await getJson(d.store, await lineageKey(sandboxId, path)));
  return parsed.success ? parsed.data : undefined;
}
