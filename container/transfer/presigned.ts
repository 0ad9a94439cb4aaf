// The presigned paths: the agent moves archive bytes straight between the sandbox and the object store over
// short-lived single-key URLs that the Worker signed, so no byte crosses the Worker.
//
//   uploadFile:     a staged archive → one PUT (Content-Length known, so R2 accepts it; presigned-http.ts's putBody)
//   downloadTo:     one GET → a file, or piped straight into the extractor
// The SHA-256 of the bytes that crossed is computed on the way, so the caller can check them.
import { createReadStream, createWriteStream } from "node:fs";
import { mkdir, rm, stat } from "node:fs/promises";
import { dirname } from "node:path";
import { Readable, Writable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { AgentError, toolFailure } from "../http/agent-error.ts";
import { extractFromStream, type ExtractVerification, type VerifiedExtract } from "../extract/extract.ts";
import { HashingStream } from "../archive/hashing-stream.ts";
import { putBody } from "./presigned-http.ts";
import { fetchWithStallDeadline } from "./stall-deadline.ts";
import type { TarFormat, WrittenBytes } from "../contract/protocol.ts";
import { checkUrl } from "./check-url.ts";


export async function uploadFile(file: string, url: string, createOnly = false): Promise<WrittenBytes> {
  const started = performance.now();
  const u = checkUrl(url, "url");
  const size = (await stat(file).catch(() => null))?.size;
  if (size === undefined) throw new AgentError("not_found", "no file to upload at path", "path");
  const hashing = new HashingStream();
  const reading = pipeline(createReadStream(file, { highWaterMark: 1 << 20 }), hashing);
  const [put, read] = await Promise.allSettled([putBody(u, hashing, size, "presigned PUT", createOnly ? { "if-none-match": "*" } : {}), reading]);
  // The store's answer says more than the read that broke because the request did.
  if (put.status === "rejected") throw put.reason;
  if (read.status === "rejected") throw toolFailure("reading the file to upload", read.reason);
  return { bytes: hashing.bytes, sha256: hashing.digest(), ms: Math.round(performance.now() - started) };
}

async function get(url: string): Promise<Readable> {
  const u = checkUrl(url, "url");
  // A stalled store fails the request after a deadline on its silence (stall-deadline.ts), not never.
  const { response: r, body } = await fetchWithStallDeadline(u, `presigned GET ${u.pathname}`).catch((e) => Promise.reject(toolFailure("presigned GET failed", e)));
  if (!r.ok || !body) {
    let text = "";
    if (body) for await (const chunk of body) if ((text += chunk).length > 500) break;
    body?.destroy();
    throw new AgentError("tool_failed", `presigned GET answered ${r.status}: ${text.slice(0, 500)}`);
  }
  return body;
}

export async function downloadToFile(url: string, output: string): Promise<WrittenBytes> {
  const started = performance.now();
  const body = await get(url);
  await mkdir(dirname(output), { recursive: true });
  const hashing = new HashingStream();
  await pipeline(body, hashing, createWriteStream(output)).catch(async (e) => {
    // A partial download is nobody's: a retry starts the file again.
    await rm(output, { force: true });
    throw toolFailure("presigned GET", e);
  });
  return { bytes: hashing.bytes, sha256: hashing.digest(), ms: Math.round(performance.now() - started) };
}

/** Reads a URL to the end and hashes it, keeping nothing: checks what the store holds without a copy on disk. */
export async function hashUrl(url: string): Promise<WrittenBytes> {
  const started = performance.now();
  const hashing = new HashingStream();
  await pipeline(await get(url), hashing, new Writable({ write: (_chunk, _enc, done) => done() })).catch((e) => Promise.reject(toolFailure("presigned GET", e)));
  return { bytes: hashing.bytes, sha256: hashing.digest(), ms: Math.round(performance.now() - started) };
}

/** With `verify`, each entry is checked against the manifest as it streams into tar (extract.ts). */
export async function downloadAndExtract(url: string, format: TarFormat, dir: string, verify?: ExtractVerification): Promise<WrittenBytes | VerifiedExtract> {
  return verify ? extractFromStream(await get(url), format, dir, verify) : extractFromStream(await get(url), format, dir);
}
