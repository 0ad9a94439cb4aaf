// The store's sweeper (the lifecycle cron, and the stack when it starts): multipart uploads that no running backup
// owns are aborted. A recorded upload (upload-records.ts) whose backup's Workflow has ended is an orphan at once;
// one whose owner cannot be asked (a benchmark cell's backup has no Workflow of its own) once it is older than
// the bound. An upload nobody recorded (opened before records existed, or its record lost) is found by listing
// the store's open uploads and aborted past the bound. The bound is longer than any run.
import type { Deps } from "../deps.ts";
import { PACK_PREFIX } from "../chunks/pack-keys.ts";
import { listAll } from "./list-all.ts";
import { UPLOADS_PREFIX, type UploadRecord } from "./upload-records.ts";

export const UPLOAD_SWEEP_OLDER_THAN_MS = 12 * 3600_000;

/**
 * Where snapflow opens multipart uploads: a backup's archive (snapshots/<id>/…) and a file-level backup's pack
 * (packs/<tenant>/<id>). An unrecorded upload is looked for under each.
 */
export const UPLOAD_PREFIXES = ["snapshots/", PACK_PREFIX] as const;

/** live: its backup runs; ended: its backup's Workflow finished (any way); unknown: there is no Workflow to ask. */
export type Owner = "live" | "ended" | "unknown";

export interface UploadSweep {
  aborted: { key: string; uploadId: string; why: string }[];
  kept: number;
}

export async function sweepUploads(d: Deps, ownerOf: (snapshotId: string) => Promise<Owner>, olderThanMs = UPLOAD_SWEEP_OLDER_THAN_MS, now = Date.now(), prefixes: readonly string[] = UPLOAD_PREFIXES): Promise<UploadSweep> {
  const out: UploadSweep = { aborted: [], kept: 0 };
  const recorded = new Set<string>();
  for await (const o of listAll(d.store, UPLOADS_PREFIX)) {
    const got = await d.store.get(o.key);
    if (!got) continue;
    const r = (await new Response(got.body).json()) as UploadRecord;
    recorded.add(r.uploadId);
    const owner = await ownerOf(r.snapshotId);
    const old = now - Date.parse(r.createdAt) >= olderThanMs;
    if (owner === "live" || (owner === "unknown" && !old)) {
      out.kept++;
      continue;
    }
    await d.store.resumeMultipartUpload(r.key, r.uploadId).abort();
    await d.store.delete(o.key);
    out.aborted.push({ key: r.key, uploadId: r.uploadId, why: owner === "ended" ? `backup ${r.snapshotId} has ended` : `older than ${olderThanMs / 3600_000} h, owner unknown` });
  }
  const open = (await Promise.all(prefixes.map((prefix) => d.presigner.listUploads(prefix)))).flat();
  for (const u of open) {
    if (recorded.has(u.uploadId)) continue;
    if (now - Date.parse(u.initiated) < olderThanMs) {
      out.kept++;
      continue;
    }
    await d.presigner.resumeMultipartUpload(u.key, u.uploadId).abort();
    out.aborted.push({ key: u.key, uploadId: u.uploadId, why: `unrecorded, older than ${olderThanMs / 3600_000} h` });
  }
  return out;
}
