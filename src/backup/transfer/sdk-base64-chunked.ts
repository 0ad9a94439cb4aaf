// sdk-base64-chunked, the seeds' baseline: the staged archive is split into 10 MiB chunk files, each read through
// the SDK file API as base64 and decoded here, then uploaded as one part. It exists to show what that costs.
import { since } from "../../phases/phase-runner.ts";
import { base64ToBytes } from "../../sandbox/base64-events.ts";
import { equalPartGuard } from "../../store/multipart-upload.ts";
import type { BackupTransfer } from "./backup-transfer.ts";

const SDK_CHUNK_BYTES = 10 * 2 ** 20;

export const sdkBase64ChunkedTransfer: BackupTransfer = {
  streamsArchive: false,
  singlePass: true,
  hashedByWorker: false,
  async transfer({ d, p, agent, archived, key, started }) {
    const { chunks } = await agent.split(archived.staged!, SDK_CHUNK_BYTES);
    const upload = equalPartGuard(await d.store.createMultipartUpload(key), SDK_CHUNK_BYTES);
    try {
      const parts = [];
      let bytes = 0;
      for (const [i, chunk] of chunks.entries()) {
        const decoded = base64ToBytes(await d.transport.readFileBase64(p.sandboxId, chunk.path));
        parts.push(await upload.uploadPart(i + 1, decoded));
        bytes += decoded.byteLength;
        await agent.deleteFile(chunk.path).catch(() => {});
      }
      await upload.complete(parts);
      await agent.deleteFile(archived.staged!).catch(() => {});
      return { ms: since(started), bytes, sha256: archived.sha256!, parts: parts.length };
    } catch (e) {
      await upload.abort().catch(() => {});
      throw e;
    }
  },
};
