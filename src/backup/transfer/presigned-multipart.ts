// presigned-multipart: the agent cuts the live tar stream into equal parts and PUTs them in parallel to presigned
// part URLs; the Worker only opens the upload (over the S3 API, which the URLs address), signs URLs and completes
// or aborts. No archive byte crosses the Worker.
import { SnapflowError } from "../../errors.ts";
import { since } from "../../phases/phase-runner.ts";
import { R2_MULTIPART } from "../../../container/r2-limits.ts";
import type { BackupTransfer } from "./backup-transfer.ts";
import { partSizeOf } from "./part-size.ts";
import { tarOnly } from "./tar-only.ts";

export const presignedMultipartTransfer: BackupTransfer = {
  streamsArchive: true,
  // The agent's parallel part uploader reads tar's stream itself; it does not make the manifest on the way (yet).
  singlePass: false,
  hashedByWorker: false,
  async transfer({ d, p, s, agent, archived, key, started }) {
    const format = tarOnly(s);
    // The archive is at most about the tree's size; 25% headroom and one spare part cover incompressible data.
    const expected = archived.manifest!.bytes; // this path is not single-pass: the archive phase took the manifest
    const partSize = partSizeOf(p, expected);
    const count = Math.min(R2_MULTIPART.maxParts, Math.ceil((expected * 1.25) / partSize) + 1);
    const upload = await d.presigner.createMultipartUpload(key);
    try {
      const urls = await Promise.all(Array.from({ length: count }, (_, i) => d.presigner.partUrl(upload, i + 1)));
      const up = await agent.uploadMultipart({ source: { archive: { path: p.path, format } }, partSize, concurrency: p.tuning?.concurrency ?? 4, urls }, expected);
      // R2's equal-part rule, checked on what the agent reports before completing.
      const unequal = up.parts.slice(0, -1).find((part) => part.bytes !== partSize);
      if (unequal) throw new SnapflowError("part_rule", `part ${unequal.partNumber} has ${unequal.bytes} bytes; every part but the last must have ${partSize}`);
      await upload.complete(up.parts.map(({ partNumber, etag }) => ({ partNumber, etag })));
      return { ms: since(started), bytes: up.bytes, sha256: up.sha256, parts: up.parts.length, agentPeakBufferedBytes: up.peakBufferedBytes };
    } catch (e) {
      await upload.abort().catch(() => {});
      throw e;
    }
  },
};
