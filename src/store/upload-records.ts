// Every multipart upload a backup opens is recorded in the store before its first part is sent
// (uploads/<snapshotId>/<uploadId>) and the record dropped once the upload is completed or aborted. An upload
// is only ever aborted in a `catch` otherwise, and a killed isolate, a timed-out step or a stopped stack never
// reaches one: with the record, the backup's cleanup aborts what any of its attempts left open, and the sweeper
// (sweep-uploads.ts) aborts what a run that never cleaned up left.
import type { Deps } from "../deps.ts";
import type { MultipartUpload, ObjectStore } from "./object-store.ts";
import { listAll } from "./list-all.ts";
import type { Presigner } from "./presigner.ts";

export const UPLOADS_PREFIX = "uploads/";
export const uploadRecordPrefix = (snapshotId: string) => `${UPLOADS_PREFIX}${snapshotId}/`;
const recordKey = (snapshotId: string, uploadId: string) => `${uploadRecordPrefix(snapshotId)}${encodeURIComponent(uploadId)}`;

export interface UploadRecord {
  snapshotId: string;
  key: string;
  uploadId: string;
  createdAt: string;
}

async function remember(store: ObjectStore, snapshotId: string, upload: MultipartUpload): Promise<void> {
  const record: UploadRecord = { snapshotId, key: upload.key, uploadId: upload.uploadId, createdAt: new Date().toISOString() };
  try {
    await store.put(recordKey(snapshotId, upload.uploadId), JSON.stringify(record), { contentType: "application/json" });
  } catch (e) {
    // Unrecorded, the upload could outlive us: give it up rather than send parts into it.
    await upload.abort().catch(() => {});
    throw e;
  }
}

/** Completed or aborted: the record has done its job. Failing to drop it leaves only a record the sweeper drops. */
const forget = (store: ObjectStore, snapshotId: string, uploadId: string) =>
  store.delete(recordKey(snapshotId, uploadId)).catch((e) => console.warn(`upload record ${uploadId} of ${snapshotId} not removed: ${e instanceof Error ? e.message : String(e)}`));

function tracked(store: ObjectStore, snapshotId: string, upload: MultipartUpload): MultipartUpload {
  return {
    key: upload.key,
    uploadId: upload.uploadId,
    uploadPart: (n, body) => upload.uploadPart(n, body),
    async complete(parts) {
      const done = await upload.complete(parts);
      await forget(store, snapshotId, upload.uploadId);
      return done;
    },
    async abort() {
      await upload.abort();
      await forget(store, snapshotId, upload.uploadId);
    },
  };
}

/** The backup's deps with every multipart upload it opens (from the Worker or over presigned URLs) recorded. */
export function withUploadRecords(d: Deps, snapshotId: string): Deps {
  const store: ObjectStore = {
    ...d.store,
    async createMultipartUpload(key, options) {
      const upload = await d.store.createMultipartUpload(key, options);
      await remember(d.store, snapshotId, upload);
      return tracked(d.store, snapshotId, upload);
    },
  };
  const presigner: Presigner = {
    ...d.presigner,
    async createMultipartUpload(key) {
      const upload = await d.presigner.createMultipartUpload(key);
      await remember(d.store, snapshotId, upload);
      return tracked(d.store, snapshotId, upload);
    },
  };
  return { ...d, store, presigner };
}

/** The uploads recorded for a backup and not yet completed or aborted. */
export async function recordedUploads(store: ObjectStore, snapshotId: string): Promise<UploadRecord[]> {
  const out: UploadRecord[] = [];
  for await (const o of listAll(store, uploadRecordPrefix(snapshotId))) {
    const got = await store.get(o.key);
    if (got) out.push((await new Response(got.body).json()) as UploadRecord);
  }
  return out;
}

/** Aborts every upload a backup recorded (an abort of one already gone is fine) and drops the records. Repeatable. */
export async function abortRecordedUploads(store: ObjectStore, snapshotId: string): Promise<number> {
  const open = await recordedUploads(store, snapshotId);
  for (const r of open) await tracked(store, snapshotId, store.resumeMultipartUpload(r.key, r.uploadId)).abort();
  return open.length;
}

/**
 * The store's open uploads at exactly these keys (a backup's own archive or pack), found by listing rather than by
 * record, and aborted: a part PUT still in flight when its upload was aborted can leave the upload listed again on
 * SeaweedFS (seen in cancel-run-integration: the record gone with the first abort, the upload open 1.5 s later).
 */
export async function abortListedUploads(presigner: Presigner, keys: string[]): Promise<number> {
  let n = 0;
  for (const key of keys) {
    for (const u of await presigner.listUploads(key)) {
      if (u.key !== key) continue;
      await presigner.resumeMultipartUpload(u.key, u.uploadId).abort();
      n++;
    }
  }
  return n;
}
