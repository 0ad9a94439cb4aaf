// Streaming multipart upload of a body whose length is not known in advance (a pipe from tar).
//
//   body ──► cut into parts of exactly `partSize` bytes (the last may be shorter)
//        ──► at most `concurrency` parts uploading at once, plus the one being filled
//        ──► complete, or abort on any failure (no orphaned parts, nothing half-written under the key)
//
// The upload is opened once the first part is full: a body that ends within it (a small delta) goes as one PUT bound
// to its SHA-256 (the store checks it), without the create and complete requests of a multipart upload. Until then
// the part would have waited for the body's end anyway, so nothing that overlapped is lost.
//
// Memory is bounded by (concurrency + 1) × partSize whatever the body's size: the seeds' pipe strategy
// buffered the whole archive and ran out of Worker memory at ~220 MB. The body is read in 256 KiB blocks
// (block-reader.ts), so the digest, the progress callback and the cutting run per block, not per 4 KB chunk.
//
// R2's rules, enforced here because no local S3 server does: every part but the last has the same size,
// parts are at least 5 MiB (a single-part upload may be smaller), at most 10,000 parts.
import { R2_MULTIPART } from "../../container/contract/r2-limits.ts";
import { SnapflowError } from "../errors.ts";
import type { MultipartUpload, ObjectInfo, ObjectStore, PutOptions, UploadedPart } from "./object-store.ts";

const MiB = 2 ** 20;

/** An upload that would break R2's rules: our bug, refused before the store sees it (permanent). */
export class PartRuleError extends SnapflowError {
  constructor(message: string) {
    super("part_rule", message);
  }
}

/**
 * The part size for an object of about `expectedBytes`: at least `minPartBytes`, and large enough that even 25%
 * more bytes than expected (a stream's size is an estimate) stays under 10,000 parts. Whole MiB.
 */
export function partSizeFor(expectedBytes: number, minPartBytes = 8 * MiB): number {
  const needed = Math.ceil((expectedBytes * 1.25) / R2_MULTIPART.maxParts);
  const size = Math.ceil(Math.max(minPartBytes, needed, R2_MULTIPART.minPartBytes) / MiB) * MiB;
  if (size > R2_MULTIPART.maxPartBytes) throw new PartRuleError(`${expectedBytes} bytes cannot fit in ${R2_MULTIPART.maxParts} parts of at most 5 GiB`);
  return size;
}

/** Wraps an upload so that it refuses, before the store sees them, parts that would break R2's rules. */
export function equalPartGuard(upload: MultipartUpload, partSize: number): MultipartUpload {
  if (partSize < R2_MULTIPART.minPartBytes) throw new PartRuleError(`part size ${partSize} is below R2's minimum of 5 MiB`);
  const sizes = new Map<number, number>();
  return {
    key: upload.key,
    uploadId: upload.uploadId,
    uploadPart(partNumber, body) {
      if (!Number.isInteger(partNumber) || partNumber < 1 || partNumber > R2_MULTIPART.maxParts) {
        return Promise.reject(new PartRuleError(`part number ${partNumber} is outside 1..${R2_MULTIPART.maxParts}`));
      }
      if (body.byteLength > partSize) return Promise.reject(new PartRuleError(`part ${partNumber} has ${body.byteLength} bytes, more than the part size ${partSize}`));
      sizes.set(partNumber, body.byteLength);
      return upload.uploadPart(partNumber, body);
    },
    // async: a refusal is a rejected promise, like every other failure of complete(), not a synchronous throw.
    async complete(parts: UploadedPart[]) {
      const numbers = parts.map((p) => p.partNumber).sort((a, b) => a - b);
      numbers.forEach((n, i) => {
        if (n !== i + 1) throw new PartRuleError(`parts must be numbered 1..${numbers.length} without gaps, found ${n} at position ${i + 1}`);
        const size = sizes.get(n);
        if (size === undefined) throw new PartRuleError(`part ${n} was not uploaded through this upload`);
        if (i < numbers.length - 1 && size !== partSize) {
          throw new PartRuleError(`part ${n} has ${size} bytes but every part except the last must have exactly ${partSize} (R2 rejects unequal parts)`);
        }
      });
      return upload.complete(parts);
    },
    abort: () => upload.abort(),
  };
}

export interface StreamUploadOptions extends Omit<PutOptions, "length"> {
  partSize: number;
  concurrency?: number;
  /** after each block read, with the bytes read so far (the first call is the body's first byte) */
  onProgress?: (bytes: number) => void;
  /** the body's read size (default RELAY_BLOCK_BYTES) */
  blockBytes?: number;
}

export interface StreamUploadResult {
  object: ObjectInfo;
  bytes: number;
  parts: number;
  sha256: string;
  /** the reads made of the body: one per block, so about bytes / 256 KiB (one per 4 KB chunk if read as it came) */
  reads: number;
}

import { blockReader } from "./block-reader.ts";
import { toHex } from "./hash-stream.ts";

export async function uploadStreamMultipart(store: ObjectStore, key: string, body: ReadableStream<Uint8Array>, options: StreamUploadOptions): Promise<StreamUploadResult> {
  const { partSize, concurrency = 2 } = options;
  if (partSize < R2_MULTIPART.minPartBytes) throw new PartRuleError(`part size ${partSize} is below R2's minimum of 5 MiB`);
  let upload: MultipartUpload | undefined;
  const digest = new crypto.DigestStream("SHA-256");
  const digestWriter = digest.getWriter();
  const parts: UploadedPart[] = [];
  const inflight = new Set<Promise<void>>();
  let failed: unknown;
  let bytes = 0;

  const spare: Uint8Array[] = [];
  const send = async (partNumber: number, part: Uint8Array) => {
    upload ??= equalPartGuard(await store.createMultipartUpload(key, options), partSize);
    while (inflight.size >= concurrency) await Promise.race(inflight);
    if (failed) throw failed;
    const p = upload.uploadPart(partNumber, part).then(
      (done) => {
        parts.push(done);
        // The part has been sent: its buffer can hold a later part (less garbage for the isolate to collect).
        if (part.byteLength === partSize) spare.push(part);
      },
      (e) => void (failed ??= e),
    );
    inflight.add(p);
    void p.finally(() => inflight.delete(p));
  };

  const reader = blockReader(body, options.blockBytes);
  try {
    const nextBuffer = () => spare.pop() ?? new Uint8Array(partSize);
    let buffer = nextBuffer();
    let filled = 0;
    let partNumber = 0;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      await digestWriter.write(value);
      bytes += value.byteLength;
      options.onProgress?.(bytes);
      let offset = 0;
      while (offset < value.byteLength) {
        const n = Math.min(partSize - filled, value.byteLength - offset);
        buffer.set(value.subarray(offset, offset + n), filled);
        filled += n;
        offset += n;
        if (filled === partSize) {
          await send(++partNumber, buffer);
          buffer = nextBuffer();
          filled = 0;
        }
      }
      if (failed) throw failed;
    }
    if (!upload) {
      // The whole body fits in the first part (possibly empty): one PUT.
      await digestWriter.close();
      const sha256 = toHex(await digest.digest);
      const { partSize: _p, concurrency: _c, onProgress: _o, blockBytes: _b, ...put } = options;
      const object = await store.put(key, buffer.subarray(0, filled), { ...put, sha256: put.sha256 ?? sha256 });
      return { object, bytes, parts: 1, sha256, reads: reader.blocks };
    }
    // The last part: whatever is left.
    if (filled > 0) await send(++partNumber, buffer.slice(0, filled));
    await Promise.all(inflight);
    if (failed) throw failed;
    if (parts.length > R2_MULTIPART.maxParts) throw new PartRuleError(`${parts.length} parts exceed R2's limit of ${R2_MULTIPART.maxParts}; use a larger part size`);
    await digestWriter.close();
    const object = await upload.complete(parts);
    return { object, bytes, parts: parts.length, sha256: toHex(await digest.digest), reads: reader.blocks };
  } catch (e) {
    // The body's source (the agent's tar) stops too, instead of waiting on a reader that is gone.
    await reader.cancel(e).catch(() => {});
    await Promise.allSettled(inflight);
    await upload?.abort().catch(() => {});
    throw e;
  }
}
