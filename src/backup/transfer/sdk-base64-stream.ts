// sdk-base64-stream, a baseline: the staged archive read through the SDK's streaming file API (base64 in
// server-sent events), decoded in the Worker and uploaded as multipart.
import { SnapflowError } from "../../errors.ts";
import { since } from "../../phases/phase-runner.ts";
import { partSizeFor, uploadStreamMultipart } from "../../store/multipart-upload.ts";
import type { BackupTransfer } from "./backup-transfer.ts";

export const sdkBase64StreamTransfer: BackupTransfer = {
  streamsArchive: false,
  singlePass: true,
  hashedByWorker: false,
  async transfer({ d, p, agent, archived, key, started }) {
    const body = await d.transport.readFileStreamBase64(p.sandboxId, archived.staged!);
    const up = await uploadStreamMultipart(d.store, key, body, { partSize: partSizeFor(archived.bytes), concurrency: 2 });
    if (up.sha256 !== archived.sha256) throw new SnapflowError("transfer_damaged", `decoded bytes (sha256 ${up.sha256}) are not the staged archive (sha256 ${archived.sha256})`);
    await agent.deleteFile(archived.staged!).catch(() => {});
    return { ms: since(started), bytes: up.bytes, sha256: up.sha256, parts: up.parts };
  },
};
