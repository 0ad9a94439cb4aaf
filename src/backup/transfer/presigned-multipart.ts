// presigned-multipart: the agent cuts the live tar stream into equal parts and PUTs them in parallel to presigned
// part URLs; the Worker only opens the upload (over the S3 API, which the URLs address), signs URLs and completes
// or aborts. No archive byte crosses the Worker.
//
// Part URLs are all signed up front (the agent cannot ask the Worker for more mid-stream), each with an expiry
// fitted to when it will be used: part n cannot start before n - 1 parts have been cut from the stream, so its URL
// lives 60 s plus those bytes at a slow 2 MB/s of archive output (partUrlExpirySeconds), never longer than
// PRESIGN_EXPIRY_SECONDS (the presigner's cap: no URL outlives the deployment's policy). A leaked early URL is
// useless within a minute or so; a late one lives as long as the stream plausibly needs to reach it. When the
// stream is slower than that (or the upload outlasts the cap), the store answers 403 "Request has expired" to the
// late part: the agent reports it as `url_expired` (502, not its generic tool failure), this step aborts the
// upload, and the step's retry signs fresh URLs for a new upload. An upload that can never finish within
// PRESIGN_EXPIRY_SECONDS fails after the retries naming the expired URL: raise the cap or use the Worker's
// multipart path. (Signing in batches as the upload proceeds would need the agent to call back to the Worker.)
//
// One walk: the agent makes the archive in a single pass (container/transfer/presigned-multipart.ts), so the manifest this
// path records is the one made from the archive's own stream, with tar's entries named by the sorted walk, as on
// every other tar path. The archive phase's manifest (a walk of its own, taken because every part URL is signed up
// front and their number needs the tree's size) only sizes the upload: the single-pass one replaces it in the
// store before the snapshot is recorded, so a restore checks the archive against what the archive holds.
//
// Integrity: the upload is opened with SHA-256 part checksums, the agent reports each part's SHA-256 (hashed from
// its buffer before the PUT), and the completion lists them, so the store itself refuses an object whose parts are
// not the ones reported (BadDigest: permanent, the run stops, the upload is aborted). The composite of the
// reported hashes is what the store must then keep for the object: verify reads it back (backup-phases.ts).
import { SnapflowError } from "../../errors.ts";
import { since } from "../../phases/phase-runner.ts";
import { R2_MULTIPART } from "../../../container/contract/r2-limits.ts";
import { sandboxPaths } from "../../sandbox/sandbox-paths.ts";
import { compositeSha256 } from "../../store/part-checksums.ts";
import { storeSinglePassManifest } from "../single-pass.ts";
import type { BackupTransfer } from "./backup-transfer.ts";
import { partSizeOf } from "./part-size.ts";
import { tarOnly } from "./tar-only.ts";

/** Part `n`'s URL: a minute, plus the n - 1 parts cut before it at a slow 2 MB/s of archive output. */
export function partUrlExpirySeconds(partNumber: number, partSize: number): number {
  return 60 + Math.ceil(((partNumber - 1) * partSize) / 2e6);
}

export const presignedMultipartTransfer: BackupTransfer = {
  streamsArchive: true,
  // The archive phase still walks the tree first, to size the upload; the manifest recorded is the transfer's.
  singlePass: false,
  hashedByWorker: false,
  async transfer({ d, p, s, agent, archived, key, started }) {
    const format = tarOnly(s);
    // The archive is at most about the tree's size; 25% headroom and one spare part cover incompressible data.
    const expected = archived.manifest!.bytes; // the archive phase's walk: a size, not the manifest recorded
    const partSize = partSizeOf(p, expected);
    const count = Math.min(R2_MULTIPART.maxParts, Math.ceil((expected * 1.25) / partSize) + 1);
    const upload = await d.presigner.createMultipartUpload(key);
    try {
      const fixed = p.tuning?.partUrlExpirySeconds;
      const urls = await Promise.all(Array.from({ length: count }, (_, i) => d.presigner.partUrl(upload, i + 1, fixed ?? partUrlExpirySeconds(i + 1, partSize))));
      const manifestOut = sandboxPaths.manifestOut(p.snapshotId);
      const up = await agent.uploadMultipart({ source: { archive: { path: p.path, format, manifestOut } }, partSize, concurrency: p.tuning?.concurrency ?? 4, urls }, expected);
      if (!up.manifest) throw new SnapflowError("agent_error", `the agent in sandbox ${p.sandboxId} uploaded the archive without the manifest of what it archived (an agent older than this Worker?)`);
      // R2's equal-part rule, checked on what the agent reports before completing.
      const unequal = up.parts.slice(0, -1).find((part) => part.bytes !== partSize);
      if (unequal) throw new SnapflowError("part_rule", `part ${unequal.partNumber} has ${unequal.bytes} bytes; every part but the last must have ${partSize}`);
      await upload.complete(up.parts.map(({ partNumber, etag, sha256 }) => ({ partNumber, etag, sha256 })));
      const storeChecksum = await compositeSha256(up.parts.map((part) => part.sha256));
      // The manifest of what the archive holds replaces the sizing walk's (the record takes its totals from here).
      const made = await storeSinglePassManifest(d, p, agent, { bytes: up.bytes, sha256: up.sha256, ms: up.ms, manifest: up.manifest });
      return { ms: since(started), bytes: up.bytes, sha256: up.sha256, parts: up.parts.length, storeChecksum, agentPeakBufferedBytes: up.peakBufferedBytes, ...made };
    } catch (e) {
      await upload.abort().catch(() => {});
      throw e;
    }
  },
};
