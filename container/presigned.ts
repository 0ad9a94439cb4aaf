// The presigned paths: the agent moves archive bytes straight between the sandbox and the object store over
// short-lived single-key URLs that the Worker signed, so no byte crosses the Worker.
//
//   uploadFile:     a staged archive → one PUT (Content-Length known, so R2 accepts it)
//   downloadTo:     one GET → a file, or piped straight into the extractor
// The SHA-256 of the bytes that crossed is computed on the way, so the caller can check them.
import { createReadStream, createWriteStream } from "node:fs";
import { mkdir, stat } from "node:fs/promises";
import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";
import { dirname } from "node:path";
import { Readable, Writable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { AgentError } from "./agent-error.ts";
import { extractFromStream } from "./extract.ts";
import { HashingStream } from "./hashing-stream.ts";
import type { TarFormat, WrittenBytes } from "./protocol.ts";

/** The URL must be http(s); anything else (file:, data:) would let a caller read or write where it should not. */
export function checkUrl(url: string, field: string): URL {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new AgentError("bad_request", `${field} is not a URL`, field);
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") throw new AgentError("bad_request", `${field} must be an http(s) URL`, field);
  return u;
}

export async function uploadFile(file: string, url: string): Promise<WrittenBytes> {
  const started = performance.now();
  const u = checkUrl(url, "url");
  const size = (await stat(file).catch(() => null))?.size;
  if (size === undefined) throw new AgentError("not_found", "no file to upload at path", "path");
  const hashing = new HashingStream();
  const send = u.protocol === "https:" ? httpsRequest : httpRequest;
  await new Promise<void>((resolve, reject) => {
    const req = send(u, { method: "PUT", headers: { "content-length": size } }, (res) => {
      let body = "";
      res.on("data", (d: Buffer) => (body = (body + d.toString()).slice(0, 2000)));
      res.on("end", () => {
        if (res.statusCode && res.statusCode < 300) resolve();
        else reject(new AgentError("tool_failed", `presigned PUT answered ${res.statusCode}: ${body}`));
      });
    });
    req.on("error", (e) => reject(new AgentError("tool_failed", `presigned PUT failed: ${e.message}`)));
    pipeline(createReadStream(file, { highWaterMark: 1 << 20 }), hashing, req).catch(reject);
  });
  return { bytes: hashing.bytes, sha256: hashing.digest(), ms: Math.round(performance.now() - started) };
}

async function get(url: string): Promise<Readable> {
  const r = await fetch(checkUrl(url, "url"));
  if (!r.ok || !r.body) throw new AgentError("tool_failed", `presigned GET answered ${r.status}: ${(await r.text()).slice(0, 500)}`);
  return Readable.fromWeb(r.body as import("node:stream/web").ReadableStream<Uint8Array>);
}

export async function downloadToFile(url: string, output: string): Promise<WrittenBytes> {
  const started = performance.now();
  const body = await get(url);
  await mkdir(dirname(output), { recursive: true });
  const hashing = new HashingStream();
  await pipeline(body, hashing, createWriteStream(output));
  return { bytes: hashing.bytes, sha256: hashing.digest(), ms: Math.round(performance.now() - started) };
}

/** Reads a URL to the end and hashes it, keeping nothing: checks what the store holds without a copy on disk. */
export async function hashUrl(url: string): Promise<WrittenBytes> {
  const started = performance.now();
  const hashing = new HashingStream();
  await pipeline(await get(url), hashing, new Writable({ write: (_chunk, _enc, done) => done() }));
  return { bytes: hashing.bytes, sha256: hashing.digest(), ms: Math.round(performance.now() - started) };
}

export async function downloadAndExtract(url: string, format: TarFormat, dir: string): Promise<WrittenBytes> {
  return extractFromStream(await get(url), format, dir);
}
