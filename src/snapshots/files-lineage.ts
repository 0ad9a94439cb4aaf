// Which file-level snapshot a sandbox's tree at a path last came from or went to: the parent of its next file-level
// backup (files-parent.ts). A file-level backup sets it when it is recorded, and so does a file-level restore (the
// tree it made is that snapshot's, and the sandbox keeps the restored tree's stat keys beside it, so the next backup
// there reads only what changed since). One small object per sandbox and path, overwritten: the store is strongly
// consistent where KV is not, and a pointer to a deleted snapshot only means "no parent".
//
// A tree a wake laid as an overlay over a file-level base (files-overlay-restore) is the base's tree under the wake's
// layer directories (each overlay delta's, then the upper): the lineage names that restore, and so does each backup
// of the same overlay after it, so the next backup there reads only the names those layers hold (files.ts).
//
//   files-lineage/<sandbox id>/<SHA-256 of the path, 32 hex>.json   {snapshotId, at, by: "backup" | "restore", overlay?}
import { z } from "zod";
import type { Deps } from "../deps.ts";
import { MAX_OVERLAY_CHAIN, SANDBOX_ID } from "../../container/contract/protocol.ts";
import { getJson, putJson } from "./records.ts";
import { pathDigest } from "./target-leases.ts";

async function lineageKey(sandboxId: string, path: string): Promise<string> {
  const id = SANDBOX_ID.parse(sandboxId);
  return `files-lineage/${id}/${await pathDigest(path)}.json`;
}

const SNAPSHOT_ID = z.string().regex(/^[a-z]{2}-\d{14}-[0-9a-f]{8}$/);
/** The wake whose overlay the tree is: its restore id and how many overlay deltas it laid under its upper. */
const WakeOverlay = z.object({ restoreId: SNAPSHOT_ID, deltas: z.number().int().min(0).max(MAX_OVERLAY_CHAIN) });
export type WakeOverlay = z.infer<typeof WakeOverlay>;
const Lineage = z.object({ snapshotId: SNAPSHOT_ID, at: z.string(), by: z.enum(["backup", "restore"]), overlay: WakeOverlay.optional() });

export async function setFilesLineage(d: Deps, sandboxId: string, path: string, snapshotId: string, by: "backup" | "restore", overlay?: WakeOverlay): Promise<void> {
  await putJson(d.store, await lineageKey(sandboxId, path), { snapshotId, at: new Date().toISOString(), by, ...(overlay ? { overlay } : {}) });
}

/** The snapshot the tree at (sandbox, path) last came from or went to, or undefined. */
export async function filesLineage(d: Deps, sandboxId: string, path: string): Promise<z.infer<typeof Lineage> | undefined> {
  const parsed = Lineage.safeParse(await getJson(d.store, await lineageKey(sandboxId, path)));
  return parsed.success ? parsed.data : undefined;
}
