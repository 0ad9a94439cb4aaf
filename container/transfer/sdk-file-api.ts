// What the Sandbox SDK's file API does to binary files, reproduced by the agent for the local stack, so the
// `sdk-base64` baselines pay the same cost here as in production: the container base64-encodes the bytes
// inside JSON (readFile) or inside server-sent events (readFileStream), and the Worker decodes them.
// It exists to show that cost next to the raw paths; nothing else should move bytes this way.
import { createReadStream } from "node:fs";
import { open, readFile, stat } from "node:fs/promises";
import type { ServerResponse } from "node:http";
import { AgentError } from "../http/agent-error.ts";

/** readFile(path, {encoding: "base64"}): the whole file as one base64 string in JSON. */
export async function readFileBase64(file: string): Promise<{ content: string; encoding: "base64"; size: number }> {
  const bytes = await readFile(file);
  return { content: bytes.toString("base64"), encoding: "base64", size: bytes.length };
}

/** readFileStream(path): SSE events, each a base64 chunk, then a "complete" event. */
export async function streamFileBase64(file: string, res: ServerResponse, chunkBytes = 64 * 1024): Promise<void> {
  const st = await stat(file);
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  res.write(`data: ${JSON.stringify({ type: "metadata", size: st.size, encoding: "base64" })}\n\n`);
  for await (const chunk of createReadStream(file, { highWaterMark: chunkBytes })) {
    const ok = res.write(`data: ${JSON.stringify({ type: "chunk", data: (chunk as Buffer).toString("base64") })}\n\n`);
    if (!ok) await new Promise((r) => res.once("drain", r));
  }
  res.end(`data: ${JSON.stringify({ type: "complete", bytesRead: st.size })}\n\n`);
}

/** `split -b`: cut a file into chunk files next to it (the seeds' chunked baseline reads each with readFile). */
export async function splitFile(file: string, chunkBytes: number): Promise<{ chunks: { path: string; bytes: number }[] }> {
  const st = await stat(file).catch(() => null);
  if (!st?.isFile()) throw new AgentError("not_found", "no file to split at path", "path");
  const input = await open(file, "r");
  const chunks: { path: string; bytes: number }[] = [];
  try {
    const buffer = Buffer.alloc(chunkBytes);
    for (let offset = 0, i = 0; offset < st.size || i === 0; offset += chunkBytes, i++) {
      const { bytesRead } = await input.read(buffer, 0, chunkBytes, offset);
      const path = `${file}.part-${String(i).padStart(4, "0")}`;
      const out = await open(path, "w");
      await out.write(buffer, 0, bytesRead);
      await out.close();
      chunks.push({ path, bytes: bytesRead });
      if (bytesRead < chunkBytes) break;
    }
  } finally {
    await input.close();
  }
  return { chunks };
}
