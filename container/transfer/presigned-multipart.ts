// Parallel presigned multipart upload from the agent: a stream of unknown length (tar + compressor's stdout) or a
// staged file is cut into parts of exactly `partSize` bytes as it is read, and each part is PUT to the presigned
// UploadPart URL the Worker signed for it. No temp file, no byte through the Worker.
//
// A backup's archive (single pass, tar + zstd) is first offered to the native engine, which PUTs its own parts
// (engine-parts.ts): then nothing below runs and no byte passes through the agent either. What follows is the
// fallback (no engine here, an older one, another compressor, a selection it cannot read) and the staged-file source.
//
// A backup's archive is made in a single pass (archive.ts archiveWithManifest, as every other tar backup path):
// the sorted walk names tar's entries, and the manifest is made from the tar stream on its way to the compressor,
// so a hard link in the archive points the way its manifest says, whatever the directory order (tar's own pass
// over `dir` archives in directory order, and a restore checking the archive against a manifest from a sorted walk
// refuses every snapshot whose directory order differs). The part cutter reads the compressor's output.
//
//   source ──► part buffer being filled (exactly partSize bytes, the last part may be shorter)
//          ──► at most `concurrency` parts PUT at once; reading waits for a free slot (backpressure reaches tar)
//          ──► {bytes, sha256, parts: [{partNumber, etag, bytes, sha256}], ms, peakBufferedBytes}
//
// The Worker created the multipart upload (with SHA-256 part checksums), presigned urls[i] for part number i + 1,
// and completes the upload with the returned parts (or aborts it when the agent answers an error). Each part's
// SHA-256 is taken from its buffer before the PUT: the Worker lists it in CompleteMultipartUpload, and the store
// refuses the completion if a part it holds has another hash (BadDigest). The part URLs cannot carry the hash
// (they are signed before the stream exists, and the store refuses an unsigned x-amz-checksum-sha256 header on a
// presigned request), so the check happens at completion, not per PUT.
//
// Memory: part buffers come from a pool of at most concurrency + 1 buffers of partSize bytes (the ones in flight
// plus the one being filled), so the agent holds at most (concurrency + 1) × partSize bytes of the stream,
// whatever its length: 4 × 8 MiB = 32 MiB for concurrency 3 and 8 MiB parts. `peakBufferedBytes` reports the
// most stream bytes actually held at once (filled bytes of the part being cut + bytes of parts in flight).
// Above that: the source's own read buffer (64 KiB pipe chunks from tar; none for a file, which is read straight
// into the part buffer) and the sockets' kernel buffers.
//
// R2's rules, as multipart-upload.ts enforces them on the Worker side: all parts but the last have exactly the
// same size, parts are ≥ 5 MiB (the schema refuses a smaller partSize), ≤ 10,000 parts. A stream that needs more
// parts than urls.length is refused with a 400 naming `urls`: the Worker must presign more or pick a larger
// partSize.
//
// On any failure (a part's PUT after its retries, tar exiting non-zero, too few URLs) the agent stops reading,
// kills tar, waits for the parts still in flight, and answers the error; the upload is left for the Worker to abort.
import { createHash } from "node:crypto";
import { open, stat, type FileHandle } from "node:fs/promises";
import { PassThrough, type Readable } from "node:stream";
import { AgentError, toolFailure } from "../http/agent-error.ts";
import { archiveWithManifest, type SinglePassOptions, type SinglePassResult } from "../archive/archive.ts";
import { checkUrl } from "./check-url.ts";
import { enginePartsUpload } from "./engine-parts.ts";
import { EngineBaseUnusable } from "../archive/engine-pass.ts";
import { putBytes, withRetries } from "./presigned-http.ts";
import type { TarFormat } from "../contract/protocol.ts";
import { startTool, type RunningTool } from "../system/run-tool.ts";
import { tarCreateArgv } from "../archive/tar-argv.ts";

/** With `singlePass`, the archive and its manifest from one walk (see the file comment); without, tar's own pass. */
export type MultipartSource = { archive: { dir: string; format: TarFormat; singlePass?: SinglePassOptions } } | { file: string };

export interface MultipartOptions {
  partSize: number;
  concurrency: number;
  /** urls[i] is the presigned UploadPart URL of part number i + 1 */
  urls: string[];
  /** extra attempts per part for network errors, 5xx and 429 (the part is still in memory, so a retry is cheap) */
  retries: number;
  /**
   * Test-only (armed through faults.ts, never in production): a lying agent. Part 1's bytes are changed after they
   * were hashed, so the parts reported are not the parts sent.
   */
  lie?: boolean;
}

export interface UploadedPartInfo {
  partNumber: number;
  /** without quotes, as ObjectStore's UploadedPart has it */
  etag: string;
  bytes: number;
  /** hex, of the part's bytes as they were hashed before the PUT */
  sha256: string;
}

export interface MultipartResult {
  bytes: number;
  sha256: string;
  parts: UploadedPartInfo[];
  ms: number;
  peakBufferedBytes: number;
  /** single pass: the manifest written to manifestOut */
  manifest?: SinglePassResult["manifest"];
  /** a single pass with a base: what changed (the archive holds only that), as GET /v1/archive's result has it */
  delta?: SinglePassResult["delta"];
  /** single pass: which pass made it; "native" without relay when the engine PUT the parts itself (engine-parts.ts) */
  engine?: "native" | "node";
  /** the parts were PUT by the engine, not cut here */
  uploadedBy?: "engine" | "agent";
}

/** Where part bytes come from: read(into, offset, max) fills up to `max` bytes and returns 0 at the end. */
interface PartSource {
  read(into: Buffer, offset: number, max: number): Promise<number>;
  /** after the last read: resolves when the source ended cleanly (tar exited 0), with a single pass's manifest */
  finish(): Promise<Made | void>;
  /** on failure: stop reading, kill the producer, wait for it to exit */
  abort(): Promise<void>;
}

/** What a single pass answers besides its bytes. */
type Made = Pick<MultipartResult, "manifest" | "delta" | "engine">;

/** A staged file, read straight into the part buffers (no intermediate chunks). */
async function fileSource(path: string): Promise<PartSource> {
  if (!(await stat(path).catch(() => null))?.isFile()) throw new AgentError("not_found", "source.file: no file there", "source.file");
  const fh: FileHandle = await open(path, "r");
  let closed = false;
  const close = async () => {
    if (!closed) (closed = true), await fh.close();
  };
  return {
    async read(into, offset, max) {
      return (await fh.read(into, offset, max, null)).bytesRead;
    },
    finish: close,
    abort: close,
  };
}

/** A readable stream (tar's stdout), consumed chunk by chunk; a chunk that straddles two parts is split. */
function streamSource(stream: Readable, tool?: RunningTool): PartSource {
  const it = stream[Symbol.asyncIterator]();
  let pending: Buffer | undefined;
  let ended = false;
  return {
    async read(into, offset, max) {
      if (!pending || pending.length === 0) {
        if (ended) return 0;
        const next = await it.next();
        if (next.done) {
          ended = true;
          return 0;
        }
        pending = next.value as Buffer;
      }
      const n = Math.min(max, pending.length);
      pending.copy(into, offset, 0, n);
      pending = pending.subarray(n);
      return n;
    },
    async finish() {
      await tool?.done;
    },
    async abort() {
      pending = undefined;
      stream.destroy();
      if (tool && tool.child.exitCode === null && tool.child.signalCode === null) tool.child.kill("SIGTERM");
      await tool?.done.catch(() => {});
    },
  };
}

/**
 * The single-pass archive (archive.ts) written into a pipe the part cutter reads. A failure of the archive (tar, the
 * compressor, the tree changing under it) destroys the pipe; the read that notices answers the archive's own error.
 */
function singlePassSource(dir: string, format: TarFormat, options: SinglePassOptions): PartSource {
  const pipe = new PassThrough({ highWaterMark: 1 << 16 });
  const making = archiveWithManifest(dir, format, pipe, options);
  making.catch(() => {}); // observed by read, finish and abort
  const cut = streamSource(pipe);
  return {
    read: (into, offset, max) => cut.read(into, offset, max).catch((e) => making.then(() => Promise.reject(e), (why) => Promise.reject(why))),
    finish: async () => {
      const done = await making;
      return { manifest: done.manifest, ...(done.delta ? { delta: done.delta } : {}), ...(done.engine ? { engine: done.engine } : {}) };
    },
    async abort() {
      pipe.destroy();
      await making.catch(() => {});
    },
  };
}

function openSource(source: MultipartSource): Promise<PartSource> | PartSource {
  if ("file" in source) return fileSource(source.file);
  const { dir, format, singlePass } = source.archive;
  if (singlePass) return singlePassSource(dir, format, singlePass);
  const tar = startTool(tarCreateArgv(dir, format));
  return streamSource(tar.child.stdout!, tar);
}

export async function uploadMultipart(source: MultipartSource, options: MultipartOptions): Promise<MultipartResult> {
  const started = performance.now();
  const { partSize, concurrency, urls, retries, lie } = options;
  const targets = urls.map((u, i) => checkUrl(u, `urls.${i}`));
  // The engine PUTs its own parts when it can make the pass (engine-parts.ts): then no archive byte passes through here.
  if ("archive" in source && source.archive.singlePass) {
    const { dir, format, singlePass } = source.archive;
    const native = await enginePartsUpload(dir, format, singlePass, { partSize, concurrency, retries, urls, lie }).catch((e: unknown) => {
      if (!(e instanceof EngineBaseUnusable)) throw e;
      // A delta's kept base is not what its record vouches for; nothing was sent: the agent's own pass reads the store's.
      source = { archive: { dir, format, singlePass: { ...singlePass, baseKept: undefined } } };
      return undefined;
    });
    if (native) return native;
  }
  const input = await openSource(source);

  const hash = createHash("sha256");
  const parts: UploadedPartInfo[] = [];
  const inflight = new Set<Promise<void>>();
  const pool: Buffer[] = [];
  let allocated = 0;
  let failed: unknown;
  let bytes = 0;
  let held = 0; // stream bytes in memory: the part being filled + parts in flight
  let peak = 0;
  let partNumber = 0;
  let made: Made = {};

  const takeBuffer = () => {
    const b = pool.pop();
    if (b) return b;
    // Never more than concurrency + 1: one filling, at most `concurrency` in flight.
    if (++allocated > concurrency + 1) throw new Error(`internal: part buffer pool exceeded ${concurrency + 1}`);
    return Buffer.allocUnsafe(partSize);
  };

  const dispatch = (n: number, buffer: Buffer, size: number) => {
    const what = `presigned PUT of part ${n}`;
    const sha256 = createHash("sha256").update(buffer.subarray(0, size)).digest("hex");
    if (lie && n === 1 && size > 0) buffer[0]! ^= 0xff;
    const p = withRetries(retries, () => failed !== undefined, () => putBytes(targets[n - 1]!, buffer.subarray(0, size), what)).then(
      (etag) => void parts.push({ partNumber: n, etag, bytes: size, sha256 }),
      (e) => void (failed ??= e),
    );
    const tracked = p.finally(() => {
      inflight.delete(tracked);
      held -= size;
      pool.push(buffer);
    });
    inflight.add(tracked);
  };

  try {
    for (let eof = false; !eof; ) {
      const buffer = takeBuffer();
      let filled = 0;
      while (filled < partSize) {
        const n = await input.read(buffer, filled, partSize - filled).catch((e) => Promise.reject(toolFailure("reading the upload's source", e)));
        if (failed) throw failed;
        if (n === 0) {
          eof = true;
          break;
        }
        if (filled === 0 && partNumber + 1 > urls.length) {
          throw new AgentError(
            "bad_request",
            `urls: the stream needs more than ${urls.length} parts of ${partSize} bytes (more than ${bytes} bytes); ` +
              `presign more part URLs in urls or choose a larger partSize`,
            "urls",
          );
        }
        hash.update(buffer.subarray(filled, filled + n));
        filled += n;
        bytes += n;
        held += n;
        if (held > peak) peak = held;
      }
      // A part with bytes, or the single empty part of an empty stream.
      if (filled > 0 || partNumber === 0) {
        while (inflight.size >= concurrency) await Promise.race(inflight);
        if (failed) throw failed;
        dispatch(++partNumber, buffer, filled);
      } else {
        pool.push(buffer);
      }
    }
    await Promise.all(inflight);
    if (failed) throw failed;
    made = (await input.finish()) ?? {};
  } catch (e) {
    failed ??= e;
    await input.abort();
    await Promise.allSettled(inflight);
    throw failed;
  }
  parts.sort((a, b) => a.partNumber - b.partNumber);
  return { bytes, sha256: hash.digest("hex"), parts, ms: Math.round(performance.now() - started), peakBufferedBytes: peak, uploadedBy: "agent", ...made };
}
