// presigned-put: the agent PUTs the staged archive to a presigned URL for the key; the Worker only signs.
import { SnapflowError } from "../../errors.ts";
import { since } from "../../phases/phase-runner.ts";
import type { BackupTransfer } from "./backup-transfer.ts";

/** A minute plus the upload at a slow 8 MB/s: the URL is useless soon after the work it was made for. */
export function uploadExpirySeconds(bytes: number): number {
  return 60 + Math.ceil(bytes / 8e6);
}

export const presignedPutTransfer: BackupTransfer = {
  streamsArchive: false,
  singlePass: true,
  hashedByWorker: false,
  async transfer({ d, agent, archived, key, started }) {
    // The URL binds the staged archive's SHA-256 (the store refuses other bytes), can only create the object (no
    // overwrite after the snapshot is recorded) and lives about as long as the upload needs.
    const url = await d.presigner.url(key, "PUT", { sha256: archived.sha256!, createOnly: true, expiresSeconds: uploadExpirySeconds(archived.bytes) });
    const sent = await agent.uploadToUrl({ path: archived.staged!, url, createOnly: true }, archived.bytes);
    if (sent.sha256 !== archived.sha256) throw new SnapflowError("transfer_damaged", `uploaded bytes (sha256 ${sent.sha256}) are not the staged archive (sha256 ${archived.sha256})`);
    await agent.deleteFile(archived.staged!).catch(() => {});
    return { ms: since(started), bytes: sent.bytes, sha256: sent.sha256 };
  },
};
