// sdk-backup: the Sandbox SDK's own backup, measured like every preset. The SDK's createBackup makes a squashfs
// image in its container (mksquashfs, lz4 by default) and uploads it itself (presigned, multipart above 10 MiB) to
// the bucket its BACKUP_BUCKET binding names, at backups/<id>/data.sqsh, with meta.json beside it. That bucket must
// be the snapshots bucket: the Worker then copies the image to the snapshot's key, hashing it on the way (so verify
// has the Worker's own digest), and removes the SDK's two objects, so that the snapshot is an ordinary squashfs one
// that every squashfs restore preset reads and the lifecycle manages. The step reports the SDK's part (sdkMs) apart
// from the copy (copyMs): the copy is ours, not the SDK's cost.
//
// The SDK reads its own settings from the Worker's env (its Durable Object is our Sandbox class): the BACKUP_BUCKET
// binding, BACKUP_BUCKET_NAME, CLOUDFLARE_ACCOUNT_ID and R2_ACCESS_KEY_ID / R2_SECRET_ACCESS_KEY; without them it
// refuses, naming what is missing, and the run fails with that message (docs/deploy-and-configuration.md).
// Production only: the local transport has no SDK container (the registry marks the preset unavailable there).
// Verified here: types only (npm run typecheck) and the preset's unavailability; not run against a real account.
import { SnapflowError } from "../../errors.ts";
import { since } from "../../phases/phase-runner.ts";
import { partSizeFor, uploadStreamMultipart } from "../../store/multipart-upload.ts";
import type { BackupTransfer } from "./backup-transfer.ts";

/** Where the SDK keeps a backup (its BACKUP_STORAGE_PREFIX, BACKUP_ARCHIVE_OBJECT_NAME, BACKUP_METADATA_OBJECT_NAME). */
export const sdkBackupKeys = (id: string) => ({ archive: `backups/${id}/data.sqsh`, meta: `backups/${id}/meta.json` });

export const sdkBackupTransfer: BackupTransfer = {
  // The SDK archives during this step; the archive phase only took the manifest.
  streamsArchive: true,
  singlePass: false,
  hashedByWorker: true,
  async transfer({ d, p, key, started }) {
    if (!d.transport.sdkBackup) throw new SnapflowError("strategy_unavailable", `sdk-backup needs a Sandbox SDK container; this Worker's sandboxes use the ${d.transport.kind} transport`);
    const handle = await d.transport.sdkBackup(p.sandboxId, { dir: p.path, name: p.snapshotId, ...(p.excludes?.length ? { excludes: p.excludes } : {}), ...(p.gitignore ? { gitignore: true } : {}) });
    const sdkMs = since(started);
    const sdk = sdkBackupKeys(handle.id);
    try {
      const copyStarted = performance.now();
      const made = await d.store.get(sdk.archive);
      if (!made) throw new SnapflowError("snapshot_unusable", `the SDK reported backup ${handle.id}, but ${sdk.archive} is not in the snapshots bucket: its BACKUP_BUCKET binding must name the bucket S3_BUCKET names`);
      const up = await uploadStreamMultipart(d.store, key, made.body, { partSize: partSizeFor(made.size), concurrency: 2 });
      return { ms: since(started), bytes: up.bytes, sha256: up.sha256, parts: up.parts, sdkMs, copyMs: since(copyStarted), sdkBackupId: handle.id };
    } finally {
      await d.store.delete([sdk.archive, sdk.meta]);
    }
  },
};
