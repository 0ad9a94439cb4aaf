// Parallel ranged download of one presigned GET URL (the object's size is known: the Worker HEADs it first).
//
//   tool "node", output:  [0, size) cut into ranges of `rangeSize` bytes; `concurrency` of them fetched at once,
//                         each with `Range: bytes=a-b`, checked for 206 and its Content-Range, and written at its
//                         own offset of the output file. Memory: one socket chunk per range in flight. The
//                         finished file is then hashed.
//   tool "node", extract: ranges fetched in parallel but fed to tar IN ORDER: the head range streams into the
//                         extractor, the next concurrency - 1 ranges wait in a reorder buffer, so at most
//                         concurrency × rangeSize bytes are held (`peakBufferedBytes` reports the most held).
//                         bytes/sha256 are those of the archive stream fed to tar.
//   tool "aria2c":        `aria2c -x N -s N -k 1M ...` into the output file, then hashed (file output only).
//
// A range whose connection breaks is retried from the byte where it stopped (`retries` times, for network errors,
// 5xx and 429); a 4xx (expired or bad signature) fails at once. Any failure stops the other ranges, removes a
// partial output file, and answers the error.
import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { mkdir, open, rm, stat } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { AgentError, toolFailure } from "../http/agent-error.ts";
import { aria2cArgv, aria2cInput } from "./aria2c-argv.ts";
import { extractFromStream, type ExtractVerification, type VerifiedExtract } from "../extract/extract.ts";
import { checkUrl } from "./check-url.ts";
import { getRange, redact, TransferError, withRetries } from "./presigned-http.ts";
import type { TarFormat, WrittenBytes } from "../contract/protocol.ts";
import { startTool } from "../system/run-tool.ts";

export interface RangedOptions {
  url: string;
  /** the object's size in bytes; every 206's Content-Range must agree */
  size: number;
  rangeSize: number;
  concurrency: number;
  retries: number;
}

export interface RangedResult {
  bytes: number;
  sha256: string;
  ms: number;
  tool: "node" | "aria2c";
  /** node: how many ranges were fetched */
  ranges?: number;
  /** node with extract: the most bytes held in the reorder buffer at once */
  peakBufferedBytes?: number;
}

type Range = { first: number; last: number };

function split(size: number, rangeSize: number): Range[] {
  const out: Range[] = [];
  for (let first = 0; first < size; first += rangeSize) out.push({ first, last: Math.min(size, first + rangeSize) - 1 });
  return out;
}

/** Fetches one range, handing each chunk and its absolute offset to `sink`; a broken connection resumes where it stopped. */
async function fetchRange(u: URL, r: Range, o: RangedOptions, signal: AbortSignal, sink: (chunk: Buffer, position: number) => void | Promise<void>): Promise<void> {
  const length = r.last - r.first + 1;
  const what = `presigned GET of bytes ${r.first}-${r.last} of ${redact(u)}`;
  let got = 0;
  await withRetries(o.retries, () => signal.aborted, async () => {
    const res = await getRange(u, r.first + got, r.last, o.size, what, signal);
    try {
      for await (const chunk of res as AsyncIterable<Buffer>) {
        try {
          await sink(chunk, r.first + got);
        } catch (e) {
          // Not the network's fault: do not retry.
          throw toolFailure(what, e);
        }
        got += chunk.length;
      }
    } finally {
      res.destroy();
    }
    if (got !== length) throw new TransferError(`${what}: the body ended after ${got} of ${length} bytes`, true);
  });
}

async function sha256OfFile(path: string): Promise<{ bytes: number; sha256: string }> {
  const hash = createHash("sha256");
  let bytes = 0;
  await pipeline(createReadStream(path, { highWaterMark: 1 << 20 }), async function* (source: AsyncIterable<Buffer>) {
    for await (const chunk of source) {
      hash.update(chunk);
      bytes += chunk.length;
    }
  });
  return { bytes, sha256: hash.digest("hex") };
}

export async function downloadRangedToFile(o: RangedOptions, output: string): Promise<RangedResult> {
  const started = performance.now();
  const u = checkUrl(o.url, "url");
  const ranges = split(o.size, o.rangeSize);
  await mkdir(dirname(output), { recursive: true });
  const fh = await open(output, "w");
  const ac = new AbortController();
  let failed: unknown;
  let next = 0;
  const worker = async () => {
    while (failed === undefined && next < ranges.length) {
      const r = ranges[next++]!;
      try {
        await fetchRange(u, r, o, ac.signal, async (chunk, position) => {
          for (let off = 0; off < chunk.length; ) off += (await fh.write(chunk, off, chunk.length - off, position + off)).bytesWritten;
        });
      } catch (e) {
        failed ??= e;
        ac.abort();
      }
    }
  };
  try {
    await Promise.all(Array.from({ length: Math.min(o.concurrency, ranges.length) }, worker));
  } finally {
    await fh.close();
  }
  if (failed !== undefined) {
    await rm(output, { force: true });
    throw failed;
  }
  const { bytes, sha256 } = await sha256OfFile(output);
  return { bytes, sha256, ms: Math.round(performance.now() - started), tool: "node", ranges: ranges.length };
}

/** With `verify`, the in-order stream is checked against the manifest as it feeds tar (extract.ts). */
export async function downloadRangedAndExtract(o: RangedOptions, format: TarFormat, dir: string, verify?: ExtractVerification): Promise<RangedResult & Partial<Pick<VerifiedExtract, "verified" | "equal">>> {
  const started = performance.now();
  const u = checkUrl(o.url, "url");
  const ranges = split(o.size, o.rangeSize);
  const ac = new AbortController();
  const slots = new Map<number, { chunks: Buffer[]; ended: boolean }>();
  const fetches: Promise<void>[] = [];
  let failed: unknown;
  let stopped = false;
  let wake: (() => void) | undefined;
  const poke = () => {
    const w = wake;
    wake = undefined;
    w?.();
  };
  let buffered = 0;
  let peak = 0;
  let launched = 0;

  const launchUpTo = (end: number) => {
    for (; launched < Math.min(end, ranges.length) && !stopped; launched++) {
      const slot = { chunks: [] as Buffer[], ended: false };
      slots.set(launched, slot);
      const sink = (chunk: Buffer) => {
        slot.chunks.push(chunk);
        buffered += chunk.length;
        if (buffered > peak) peak = buffered;
        poke();
      };
      fetches.push(
        fetchRange(u, ranges[launched]!, o, ac.signal, sink).then(
          () => ((slot.ended = true), poke()),
          (e) => {
            failed ??= e;
            ac.abort();
            poke();
          },
        ),
      );
    }
  };

  // The archive stream, in order: range i's bytes, then range i + 1's, ... with at most `concurrency` ranges
  // (the head and the ones after it) fetched or buffered at a time.
  async function* ordered(): AsyncGenerator<Buffer> {
    for (let i = 0; i < ranges.length; i++) {
      launchUpTo(i + o.concurrency);
      const slot = slots.get(i)!;
      for (;;) {
        if (failed !== undefined) throw failed;
        if (stopped) return;
        const chunk = slot.chunks.shift();
        if (chunk) {
          buffered -= chunk.length;
          yield chunk;
        } else if (slot.ended) break;
        else await new Promise<void>((r) => (wake = r));
      }
      slots.delete(i);
    }
  }

  let result: WrittenBytes & Partial<Pick<VerifiedExtract, "verified" | "equal">>;
  try {
    const stream = Readable.from(ordered(), { objectMode: false, highWaterMark: 1 << 20 });
    result = verify ? await extractFromStream(stream, format, dir, verify) : await extractFromStream(stream, format, dir);
  } catch (e) {
    // A failed GET makes tar see a truncated archive; the GET's error says what really went wrong.
    throw failed ?? e;
  } finally {
    stopped = true;
    ac.abort();
    poke();
    await Promise.allSettled(fetches);
  }
  if (result.bytes !== o.size) throw new AgentError("tool_failed", `fed ${result.bytes} bytes to the extractor, expected ${o.size}`);
  return { ...result, ms: Math.round(performance.now() - started), tool: "node", ranges: ranges.length, peakBufferedBytes: peak };
}

/** aria2c with N connections into `output`; its console output (errors go to stdout) is kept for the error message. */
export async function downloadWithAria2c(o: RangedOptions, output: string): Promise<RangedResult> {
  const started = performance.now();
  checkUrl(o.url, "url");
  const dir = dirname(output);
  const name = basename(output);
  await mkdir(dir, { recursive: true });
  // The presigned URL goes to aria2c on its stdin, never on its command line (aria2c-argv.ts).
  const tool = startTool(aria2cArgv(o.concurrency, o.retries), { stdin: "pipe", stdout: "pipe" });
  tool.child.stdin!.on("error", () => {}); // an aria2c that exits at once fails through `done`, with its message
  tool.child.stdin!.end(aria2cInput(o.url, dir, name));
  let out = "";
  tool.child.stdout!.on("data", (d: Buffer) => (out = (out + d.toString()).slice(-4000)));
  try {
    await tool.done;
  } catch (e) {
    await rm(output, { force: true });
    await rm(join(dir, `${name}.aria2`), { force: true });
    const err = e as AgentError;
    // Say which tool failed in a few words (its full argv is noise); a URL aria2c echoes is cut out too.
    const said = err.message.replace(/^.*? exited /s, "aria2c exited ").replace(/: $/, "");
    throw new AgentError(err.code, `${said.replaceAll(o.url, "<url>")}${out.trim() ? `; aria2c said: ${out.trim().replaceAll(o.url, "<url>")}` : ""}`);
  }
  const size = (await stat(output)).size;
  if (size !== o.size) throw new AgentError("tool_failed", `aria2c wrote ${size} bytes, expected ${o.size}`);
  const { bytes, sha256 } = await sha256OfFile(output);
  return { bytes, sha256, ms: Math.round(performance.now() - started), tool: "aria2c" };
}
