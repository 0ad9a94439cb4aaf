// The backup side of chunked snapshots, by driving snapflow-lazy: index a staged image (FastCDC chunks and their
// SHA-256, the whole image's SHA-256, in one read) and PUT the chunks the Worker found missing from the store over
// the presigned URLs it signed (each bound to the chunk's SHA-256, so the store refuses other bytes). The helper
// re-hashes every chunk from the image before sending it: an image changed since it was indexed fails the upload.
import { createWriteStream } from "node:fs";
import { mkdir, readFile, rm } from "node:fs/promises";
import { dirname } from "node:path";
import { pipeline } from "node:stream/promises";
import { AgentError } from "../http/agent-error.ts";
import { lazyTool } from "../system/lazy-tool.ts";
import { ChunkIndex } from "../contract/protocol.ts";
import { runTool, toolAndFlow, startTool } from "../system/run-tool.ts";
import { writeUrlFile } from "../transfer/url-file.ts";

export interface IndexedImage {
  index: ChunkIndex;
  ms: number;
}

/** Indexes `image` into `output` (the upload reads it there) and answers the index. */
export async function indexImage(image: string, output: string, avg: number): Promise<IndexedImage> {
  const started = performance.now();
  const bin = await lazyTool();
  await mkdir(dirname(output), { recursive: true });
  const tool = startTool([bin, "chunk", "--image", image, "--avg", String(avg)]);
  try {
    await toolAndFlow(tool, pipeline(tool.child.stdout!, createWriteStream(output)));
  } catch (e) {
    await rm(output, { force: true });
    throw e;
  }
  const parsed = ChunkIndex.safeParse(JSON.parse(await readFile(output, "utf8")));
  if (!parsed.success) throw new AgentError("tool_failed", `snapflow-lazy chunk wrote an index that does not parse: ${parsed.error.issues[0]!.message}`);
  return { index: parsed.data, ms: Math.round(performance.now() - started) };
}

export interface UploadedChunks {
  chunks: number;
  bytes: number;
  retries: number;
  ms: number;
}

/** PUTs the chunks that have a URL in `urls`, `concurrency` at a time, each retried `retries` times. */
export async function uploadChunks(image: string, index: string, urls: Record<string, string>, o: { concurrency: number; retries: number }): Promise<UploadedChunks> {
  const started = performance.now();
  if (!Object.keys(urls).length) return { chunks: 0, bytes: 0, retries: 0, ms: 0 };
  const bin = await lazyTool();
  const urlFile = `${index}.put-urls.json`;
  await writeUrlFile(urlFile, urls);
  try {
    // A large image takes as long as its upload; the helper bounds each PUT attempt itself (60 s).
    const out = await runTool([bin, "upload", "--image", image, "--index", index, "--urls", urlFile, "--concurrency", String(o.concurrency), "--retries", String(o.retries)], 6 * 3600_000);
    const r = JSON.parse(out.trim().split("\n").at(-1)!) as Omit<UploadedChunks, "ms">;
    return { chunks: r.chunks, bytes: r.bytes, retries: r.retries, ms: Math.round(performance.now() - started) };
  } finally {
    await rm(urlFile, { force: true });
  }
}
