// Archive a tree: tar (+ a compressor via `tar -I`) writing to stdout, which goes either to the HTTP response
// (streaming strategies: the archive never touches the sandbox's disk) or to a file (direct strategies).
import { createWriteStream } from "node:fs";
import { mkdir } from "node:fs/promises";
import { dirname } from "node:path";
import type { Writable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { HashingStream } from "./hashing-stream.ts";
import type { TarFormat, WrittenBytes } from "./protocol.ts";
import { startTool, toolAndFlow } from "./run-tool.ts";
import { tarCreateArgv } from "./tar-argv.ts";

/** Streams the archive of `dir` into `out`. Rejects (and the caller aborts `out`) if tar fails. */
export async function archiveToStream(dir: string, format: TarFormat, out: Writable, filesFrom?: string): Promise<WrittenBytes> {
  const started = performance.now();
  const tar = startTool(tarCreateArgv(dir, format, filesFrom));
  const hashing = new HashingStream();
  await toolAndFlow(tar, pipeline(tar.child.stdout!, hashing, out));
  return { bytes: hashing.bytes, sha256: hashing.digest(), ms: Math.round(performance.now() - started) };
}

export async function archiveToFile(dir: string, format: TarFormat, output: string, filesFrom?: string): Promise<WrittenBytes> {
  await mkdir(dirname(output), { recursive: true });
  return archiveToStream(dir, format, createWriteStream(output), filesFrom);
}
