// Routes over single files, the way the Sandbox SDK's file API sees them: raw bytes out (GET, with the SDK's
// base64 and base64-over-SSE encodings for the sdk-base64 baselines), raw bytes in (PUT, hashed as they land),
// stat, delete (never through a mount), and split a file into chunks the SDK can read one at a time.
import { createReadStream, createWriteStream } from "node:fs";
import { lstat, mkdir, readdir, rm, stat } from "node:fs/promises";
import { dirname } from "node:path";
import { pipeline } from "node:stream/promises";
import { AgentError } from "../http/agent-error.ts";
import { diskSpace } from "../system/disk-space.ts";
import { HashingStream } from "../archive/hashing-stream.ts";
import { refuseIfMounted } from "../mounts/mount-guard.ts";
import * as P from "../contract/protocol.ts";
import { checkSandboxPath } from "../system/path-confinement.ts";
import { readFileBase64, splitFile, streamFileBase64 } from "../transfer/sdk-file-api.ts";
import { STREAMED, type Routes } from "./route.ts";

export const fileRoutes: Routes = {
  "GET /v1/files": async (c) => {
    const file = await c.path(c.url.searchParams.get("path"), "path");
    const st = await stat(file).catch(() => null);
    if (!st?.isFile()) throw new AgentError("not_found", `no file at ${c.url.searchParams.get("path")}`, "path");
    // The SDK file API's encodings, for the sdk-base64 baselines (see sdk-file-api.ts).
    const encoding = c.url.searchParams.get("encoding");
    if (encoding === "base64") return readFileBase64(file);
    if (encoding === "base64-sse") return streamFileBase64(file, c.res).then(() => STREAMED);
    if (encoding !== null) throw new AgentError("bad_request", "encoding must be base64 or base64-sse when given", "encoding");
    c.res.writeHead(200, { "content-type": "application/octet-stream", "content-length": st.size });
    await pipeline(createReadStream(file, { highWaterMark: 1 << 20 }), c.res);
    return STREAMED;
  },

  "GET /v1/stat": async (c) => {
    const target = await c.path(c.url.searchParams.get("path"), "path");
    const st = await lstat(target).catch(() => null);
    if (!st) return { exists: false };
    const type = st.isDirectory() ? "dir" : st.isFile() ? "file" : st.isSymbolicLink() ? "symlink" : "other";
    return { exists: true, type, size: st.size, entries: type === "dir" ? (await readdir(target)).length : undefined };
  },

  "GET /v1/space": async (c) => {
    const path = c.url.searchParams.get("path");
    return { path, ...(await diskSpace(await c.path(path, "path"))) };
  },

  "PUT /v1/files": async (c) => {
    const file = await c.path(c.url.searchParams.get("path"), "path");
    const started = performance.now();
    await mkdir(dirname(file), { recursive: true });
    const hashing = new HashingStream();
    await pipeline(c.req, hashing, createWriteStream(file));
    return { bytes: hashing.bytes, sha256: hashing.digest(), ms: Math.round(performance.now() - started) };
  },

  "POST /v1/split": async (c) => {
    const body = await c.json(P.SplitBody);
    const file = await c.path(body.path, "path");
    const { chunks } = await splitFile(file, body.chunkBytes);
    // Answer in sandbox paths, as every other route does.
    const sandboxPath = checkSandboxPath(body.path, "path");
    return { chunks: chunks.map((k) => ({ path: sandboxPath + k.path.slice(file.length), bytes: k.bytes })) };
  },

  "DELETE /v1/files": async (c) => {
    const target = await c.path(c.url.searchParams.get("path"), "path");
    // Never delete through a mount or what backs one; the caller unmounts first (DELETE /v1/mounts).
    await refuseIfMounted(target, "path", c.root.hostRoot, c.agent.mounts, c.sandboxId);
    await rm(target, { recursive: true, force: true });
    return { deleted: true };
  },
};
