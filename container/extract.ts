// Extract an archive into a directory: from a stream (the HTTP request body: pipe-extract, nothing staged on
// disk) or from a file already in the sandbox.
import { createReadStream } from "node:fs";
import { mkdir } from "node:fs/promises";
import type { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { HashingStream } from "./hashing-stream.ts";
import type { TarFormat, WrittenBytes } from "./protocol.ts";
import { startTool, toolAndFlow } from "./run-tool.ts";
import { tarExtractArgv } from "./tar-argv.ts";

/** Returns the size and SHA-256 of the archive bytes consumed, so the caller can check them. */
export async function extractFromStream(input: Readable, format: TarFormat, dir: string): Promise<WrittenBytes> {
  const started = performance.now();
  await mkdir(dir, { recursive: true });
  const tar = startTool(tarExtractArgv(dir, format), { stdin: "pipe", stdout: "ignore" });
  const hashing = new HashingStream();
  await toolAndFlow(tar, pipeline(input, hashing, tar.child.stdin!));
  return { bytes: hashing.bytes, sha256: hashing.digest(), ms: Math.round(performance.now() - started) };
}

export function extractFromFile(archive: string, format: TarFormat, dir: string): Promise<WrittenBytes> {
  return extractFromStream(createReadStream(archive, { highWaterMark: 1 << 20 }), format, dir);
}
