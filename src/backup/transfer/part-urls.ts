// A presigned multipart upload the sandbox makes, as the Worker runs it for every path whose bytes the sandbox PUTs
// in parts itself (presigned-multipart: the tar archive; files: the file-level pack). The Worker opens the upload,
// signs a URL per part for a bound it was given, lets `send` run the sandbox's pass, checks R2's equal-part rule on
// what the sandbox reports and completes the upload with the parts' SHA-256s (the store refuses parts that are not
// those) — or aborts it when the pass had nothing to send.
//
// How many URLs: all are signed up front (the sandbox cannot ask for more mid-stream), for the bound and one spare
// part. A tree that outgrew the bound stops before the extra part (400 naming `urls`): the upload is aborted, the
// tree counted (`recount`) and twice as many URLs (or the new bound's) signed, once; a second overflow fails the run.
// Each URL lives as long as its part plausibly needs (partUrlExpirySeconds); a late part's expiry fails the attempt
// as url_expired, and the step's retry signs fresh URLs.
import { R2_MULTIPART } from "../../../container/contract/r2-limits.ts";
import type { Deps } from "../../deps.ts";
import { SnapflowError } from "../../errors.ts";
import { AgentCallError } from "../../sandbox/agent-client.ts";
import type { MultipartUpload } from "../../store/object-store.ts";
import { compositeSha256 } from "../../store/part-checksums.ts";
import type { BackupParams } from "../backup-params.ts";
import { partSizeOf } from "./part-size.ts";

/** Part `n`'s URL: a minute, plus the n - 1 parts cut before it at a slow 2 MB/s of archive output. */
export function partUrlExpirySeconds(partNumber: number, partSize: number): number {
  return 60 + Math.ceil(((partNumber - 1) * partSize) / 2e6);
}

/** Part URLs for an archive of at most `tarMax` bytes: its parts, and one spare for a tree that grows meanwhile. */
export function urlCountFor(tarMax: number, partSize: number): number {
  return Math.min(R2_MULTIPART.maxParts, Math.ceil(tarMax / partSize) + 1);
}

/**
 * The tar bound of a tree of these totals (container/transfer/tree-size.ts), grown by a quarter: a backup over a parent
 * or base whose record holds its tree's totals signs URLs for this, without the metadata walk a count takes.
 */
export function boundFrom(t: { files: number; dirs: number; symlinks: number; bytes: number }): { tarMax: number } {
  const entries = t.files + t.dirs + t.symlinks;
  return { tarMax: Math.ceil(1.25 * (t.bytes + entries * (512 + 2048) + 1024)) };
}

/** The sandbox's answer that the archive needs more parts than it was given URLs for. */
const tooFewUrls = (e: unknown) => e instanceof AgentCallError && e.status === 400 && e.field === "urls";

interface ReportedPart {
  partNumber: number;
  etag: string;
  bytes: number;
  sha256: string;
}

export interface SentInParts<T, S> {
  sent: T;
  /** the bound the last attempt was signed for (the caller's, or the recount's) */
  sized: S;
  urls: number;
  attempts: number;
  /** the composite of the parts' SHA-256s the store checked and keeps (absent: no part was sent) */
  storeChecksum?: string;
}

/**
 * `opened`: the first attempt's upload, opened by the caller beside its own lookups (the open is a store round trip).
 * `alongside`: what needs the pass's answer but not the completed upload (a file-level backup's index PUT), run while
 * the upload is completed; both must succeed.
 */
export async function sendInParts<T extends { parts: ReportedPart[] }, S extends { tarMax: number }>(
  d: Deps, p: BackupParams, key: string, sized: S, recount: () => Promise<S>,
  send: (urls: string[], partSize: number, tarMax: number) => Promise<T>,
  more: { opened?: Promise<MultipartUpload>; alongside?: (sent: T) => Promise<void> } = {},
): Promise<SentInParts<T, S>> {
  const partSize = partSizeOf(p, sized.tarMax);
  let count = urlCountFor(sized.tarMax, partSize);
  for (let attempt = 1; ; attempt++) {
    const upload = attempt === 1 && more.opened ? await more.opened : await d.presigner.createMultipartUpload(key);
    try {
      const fixed = p.tuning?.partUrlExpirySeconds;
      const urls = await Promise.all(Array.from({ length: count }, (_, i) => d.presigner.partUrl(upload, i + 1, fixed ?? partUrlExpirySeconds(i + 1, partSize))));
      const sent = await send(urls, partSize, sized.tarMax);
      if (!sent.parts.length) {
        // Nothing was sent: the upload goes, beside the index's PUT; both settle before either's failure is thrown.
        const [aborted, beside] = await Promise.allSettled([upload.abort(), more.alongside?.(sent)]);
        if (aborted.status === "rejected") throw aborted.reason;
        if (beside.status === "rejected") throw beside.reason;
        return { sent, sized, urls: count, attempts: attempt };
      }
      // R2's equal-part rule, checked on what the sandbox reports before completing.
      const unequal = sent.parts.slice(0, -1).find((part) => part.bytes !== partSize);
      if (unequal) throw new SnapflowError("part_rule", `part ${unequal.partNumber} has ${unequal.bytes} bytes; every part but the last must have ${partSize}`);
      const completed = upload.complete(sent.parts.map(({ partNumber, etag, sha256 }) => ({ partNumber, etag, sha256 })));
      // Both settle before either's failure is thrown (the abort below must not race the completion).
      const [done, beside] = await Promise.allSettled([completed, more.alongside?.(sent)]);
      if (done.status === "rejected") throw done.reason;
      if (beside.status === "rejected") throw beside.reason;
      return { sent, sized, urls: count, attempts: attempt, storeChecksum: await compositeSha256(sent.parts.map((part) => part.sha256)) };
    } catch (e) {
      await upload.abort().catch(() => {});
      if (attempt > 1 || !tooFewUrls(e) || count >= R2_MULTIPART.maxParts) throw e;
      // The tree grew past the bound: count again and sign for twice as much (or the new bound), once.
      sized = await recount();
      count = Math.max(Math.min(R2_MULTIPART.maxParts, count * 2), urlCountFor(sized.tarMax, partSize));
    }
  }
}
