// The agent's HTTP server: authenticate, find the sandbox's root, validate with the protocol's schemas, run the
// operation, answer JSON (or stream bytes). Errors become {error:{code,message,field}} with the AgentError's
// status; a failure after a streamed response has started aborts the connection, so the reader sees an error
// rather than a short archive that looks complete.
import { createReadStream } from "node:fs";
import { lstat, mkdir, readdir, rm, stat } from "node:fs/promises";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { createHash, timingSafeEqual } from "node:crypto";
import { createWriteStream } from "node:fs";
import { dirname, join } from "node:path";
import { pipeline } from "node:stream/promises";
import type { z } from "zod";
import { AgentError } from "./agent-error.ts";
import { archiveToFile, archiveToStream } from "./archive.ts";
import { generateDataset } from "./dataset.ts";
import { dropCaches } from "./drop-caches.ts";
import { planDelta, removeEntries } from "./delta.ts";
import { extractFromFile, extractFromStream } from "./extract.ts";
import { Faults } from "./faults.ts";
import { HashingStream } from "./hashing-stream.ts";
import { checkImage, extractImage, makeImage } from "./images.ts";
import { compareManifests, takeManifest, type Manifest } from "./manifest.ts";
import { listMounts, mountImage, mountOverlay, MountRegistry, readMountinfo, unmountPath, unmountSandbox } from "./mounts.ts";
import { downloadAndExtract, downloadToFile, hashUrl, uploadFile } from "./presigned.ts";
import { uploadMultipart } from "./presigned-multipart.ts";
import { downloadRangedAndExtract, downloadRangedToFile, downloadWithAria2c } from "./presigned-ranged.ts";
import { probe } from "./probe.ts";
import { readFileBase64, splitFile, streamFileBase64 } from "./sdk-file-api.ts";
import * as P from "./protocol.ts";
import { checkSandboxPath, resolveSandboxPath, type SandboxRoot } from "./sandbox-paths.ts";

export interface AgentOptions {
  token: string;
  /** Host mode: one root directory per sandbox id below this directory. Unset: this process *is* the sandbox, root "/". */
  sandboxesDir?: string;
  faults?: boolean;
}

interface Ctx {
  req: IncomingMessage;
  res: ServerResponse;
  url: URL;
  root: SandboxRoot;
  sandboxId: string;
  path(value: unknown, field: string): Promise<string>;
  json<T extends z.ZodType>(schema: T): Promise<z.infer<T>>;
  query<T extends z.ZodType>(schema: T): z.infer<T>;
}

type Handler = (ctx: Ctx) => Promise<unknown>;

function parse<T extends z.ZodType>(schema: T, value: unknown, where: string): z.infer<T> {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  const issue = r.error.issues[0]!;
  const field = issue.path.join(".") || where;
  throw new AgentError("bad_request", `${field}: ${issue.message}`, field);
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  try {
    return JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}");
  } catch {
    throw new AgentError("bad_request", "the request body is not valid JSON", "body");
  }
}

function sendJson(res: ServerResponse, status: number, body: unknown) {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

export function createAgentServer(options: AgentOptions): Server {
  const faults = new Faults();
  const mounts = new MountRegistry();
  const expected = Buffer.from(`Bearer ${options.token}`);

  const routes: Record<string, Handler> = {
    "GET /v1/probe": async (c) => probe(c.root.hostRoot),

    "POST /v1/drop-caches": async () => dropCaches(),

    "POST /v1/datasets": async (c) => {
      const body = await c.json(P.DatasetBody);
      const dir = await c.path(body.path, "path");
      if (body.replace) await rm(dir, { recursive: true, force: true });
      return generateDataset(dir, body);
    },

    "POST /v1/manifest": async (c) => {
      const body = await c.json(P.PathBody);
      return takeManifest(await existingDir(await c.path(body.path, "path"), "path"));
    },

    "POST /v1/verify": async (c) => {
      const body = await c.json(P.VerifyBody);
      const started = performance.now();
      const actual = await takeManifest(await existingDir(await c.path(body.path, "path"), "path"));
      const comparison = compareManifests(body.expected as Manifest, actual, body.limit);
      return { ...comparison, totals: actual.totals, ms: Math.round(performance.now() - started) };
    },

    "POST /v1/delta": async (c) => {
      const body = await c.json(P.DeltaBody);
      return planDelta(await existingDir(await c.path(body.path, "path"), "path"), body.base as Manifest, await c.path(body.list, "list"));
    },

    "POST /v1/remove": async (c) => {
      const body = await c.json(P.RemoveBody);
      return removeEntries(await existingDir(await c.path(body.path, "path"), "path"), body.entries);
    },

    "GET /v1/archive": async (c) => {
      const q = c.query(P.ArchiveQuery);
      const dir = await existingDir(await c.path(q.path, "path"), "path");
      const filesFrom = q.filesFrom === undefined ? undefined : await c.path(q.filesFrom, "filesFrom");
      c.res.writeHead(200, { "content-type": "application/octet-stream" });
      await archiveToStream(dir, q, c.res, filesFrom);
      return STREAMED;
    },

    "POST /v1/archive": async (c) => {
      const body = await c.json(P.ArchiveToFile);
      const dir = await existingDir(await c.path(body.path, "path"), "path");
      const filesFrom = body.filesFrom === undefined ? undefined : await c.path(body.filesFrom, "filesFrom");
      return archiveToFile(dir, body.format, await c.path(body.output, "output"), filesFrom);
    },

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
      // Never delete through a mount: a recursive rm would empty a writable overlay's layer or fail half-way on a
      // read-only image. The caller unmounts first (DELETE /v1/mounts).
      const mounted = (await readMountinfo()).find((m) => m.mountPoint === target || m.mountPoint.startsWith(target + "/"));
      if (mounted) throw new AgentError("bad_request", `path has a mount at or below it (${mounted.mountPoint.slice(c.root.hostRoot === "/" ? 0 : c.root.hostRoot.length)}); unmount it first`, "path");
      await rm(target, { recursive: true, force: true });
      return { deleted: true };
    },

    "PUT /v1/extract": async (c) => {
      const q = c.query(P.ExtractQuery);
      return extractFromStream(c.req, q, await c.path(q.path, "path"));
    },

    "POST /v1/extract": async (c) => {
      const body = await c.json(P.ExtractFile);
      const archive = await c.path(body.archive, "archive");
      if (!(await stat(archive).catch(() => null))?.isFile()) throw new AgentError("not_found", `no archive at ${body.archive}`, "archive");
      return extractFromFile(archive, body.format, await c.path(body.path, "path"));
    },

    "POST /v1/hash-url": async (c) => {
      const body = await c.json(P.HashUrlBody);
      return hashUrl(body.url);
    },

    "POST /v1/upload": async (c) => {
      const body = await c.json(P.UploadBody);
      return uploadFile(await c.path(body.path, "path"), body.url);
    },

    "POST /v1/download": async (c) => {
      const body = await c.json(P.DownloadBody);
      if ("output" in body) return downloadToFile(body.url, await c.path(body.output, "output"));
      return downloadAndExtract(body.url, body.extract.format, await c.path(body.extract.path, "extract.path"));
    },

    // ---- Parallel presigned transfers (presigned-multipart.ts, presigned-ranged.ts) ----
    "POST /v1/upload-multipart": async (c) => {
      const body = await c.json(P.UploadMultipartBody);
      const source =
        "archive" in body.source
          ? { archive: { dir: await existingDir(await c.path(body.source.archive.path, "source.archive.path"), "source.archive.path"), format: body.source.archive.format } }
          : { file: await c.path(body.source.file, "source.file") };
      return uploadMultipart(source, body);
    },

    "POST /v1/download-ranged": async (c) => {
      const body = await c.json(P.DownloadRangedBody);
      const o = { url: body.url, size: body.size, rangeSize: body.rangeSize, concurrency: body.concurrency, retries: body.retries };
      if (body.extract) return downloadRangedAndExtract(o, body.extract.format, await c.path(body.extract.path, "extract.path"));
      const output = await c.path(body.output, "output");
      return body.tool === "aria2c" ? downloadWithAria2c(o, output) : downloadRangedToFile(o, output);
    },
    // ---- end of parallel presigned transfers ----

    // ---- Filesystem images, mounts and overlays (images.ts, mounts.ts) ----
    "POST /v1/image": async (c) => {
      const body = await c.json(P.ImageBody);
      const dir = await existingDir(await c.path(body.path, "path"), "path");
      return makeImage(dir, body.format, await c.path(body.output, "output"));
    },

    "POST /v1/materialize": async (c): Promise<P.MaterializeResult> => {
      const body = await c.json(P.MaterializeBody);
      const file = await c.path(body.archive, "archive");
      const dir = await c.path(body.path, "path");
      const { bytes } = await checkImage(file, body.format);
      if (body.how === "extract") return { ...(await extractImage(file, body.format, dir)), bytes };
      const started = performance.now();
      const mounted = await mountImage(mounts, c.sandboxId, { file, source: checkSandboxPath(body.archive, "archive"), dir, path: checkSandboxPath(body.path, "path"), format: body.format, how: body.how });
      return { ms: Math.round(performance.now() - started), bytes, mounted };
    },

    "POST /v1/overlay": async (c) => {
      const body = await c.json(P.OverlayBody);
      const started = performance.now();
      const path = checkSandboxPath(body.path, "path");
      const layer = `/snapflow/overlays/${createHash("sha256").update(path).digest("hex").slice(0, 16)}`;
      const [upperPath, workPath] = body.upper ? [checkSandboxPath(body.upper, "upper"), `${checkSandboxPath(body.upper, "upper")}.work`] : [`${layer}/upper`, `${layer}/work`];
      const mounted = await mountOverlay(mounts, c.sandboxId, {
        lower: await c.path(body.lower, "lower"), lowerPath: checkSandboxPath(body.lower, "lower"),
        dir: await c.path(path, "path"), path,
        upper: await c.path(upperPath, "path"), upperPath,
        work: await c.path(workPath, "path"), workPath,
        how: body.how,
        keepUpper: body.upper !== undefined,
      });
      return { upper: upperPath, work: workPath, ms: Math.round(performance.now() - started), mounted };
    },

    "GET /v1/mounts": async (c) => ({ mounts: await listMounts(mounts, c.sandboxId) }),

    "DELETE /v1/mounts": async (c) => {
      const value = c.url.searchParams.get("path");
      const dir = await c.path(value, "path");
      return { unmounted: await unmountPath(mounts, c.sandboxId, dir, checkSandboxPath(value, "path")) };
    },
    // ---- end of filesystem images, mounts and overlays ----

    "POST /v1/faults": async (c) => {
      if (!options.faults) throw new AgentError("not_found", "fault injection is off (SNAPFLOW_AGENT_FAULTS=1 turns it on)");
      const body = await c.json(P.FaultBody);
      faults.arm(`${c.sandboxId} ${body.route}`, body.times);
      return { armed: body };
    },

    "DELETE /v1/sandbox": async (c) => {
      if (!options.sandboxesDir) throw new AgentError("bad_request", "only a host agent serving many sandboxes can drop one");
      // Never delete through a live mount: an overlay's upper, or a read-only image, would be emptied or fail.
      const unmounted = await unmountSandbox(mounts, c.sandboxId, c.root.hostRoot);
      await rm(c.root.hostRoot, { recursive: true, force: true });
      return { deleted: c.sandboxId, ...(unmounted.length ? { unmounted } : {}) };
    },
  };

  return createServer(async (req, res) => {
    const url = new URL(req.url ?? "/", "http://agent");
    const route = `${req.method} ${url.pathname}`;
    try {
      if (route === "GET /v1/health") return sendJson(res, 200, { ok: true });
      const auth = Buffer.from(req.headers.authorization ?? "");
      if (auth.length !== expected.length || !timingSafeEqual(auth, expected)) {
        throw new AgentError("unauthorized", "missing or wrong agent token (authorization: Bearer ...)", "authorization");
      }
      const handler = routes[route];
      if (!handler) throw new AgentError("not_found", `no route ${route}`);
      const { root, sandboxId } = await sandboxRoot(options, req.headers[P.SANDBOX_HEADER]);
      faults.check(`${sandboxId} ${route}`);
      const ctx: Ctx = {
        req, res, url, root, sandboxId,
        path: (value, field) => resolveSandboxPath(root, value, field),
        json: async (schema) => parse(schema, await readJson(req), "body"),
        query: (schema) => parse(schema, Object.fromEntries(url.searchParams), "query"),
      };
      const result = await handler(ctx);
      if (result !== STREAMED) sendJson(res, 200, result);
    } catch (e) {
      const err = e instanceof AgentError ? e : new AgentError("tool_failed", (e as Error).message ?? String(e));
      if (res.headersSent) {
        // Mid-stream: the only honest signal left is to break the connection.
        res.destroy(err);
        return;
      }
      // Drain what the client is still sending, so it reads our answer instead of a reset.
      req.resume();
      sendJson(res, err.status, err.toJSON());
    }
  });
}

const STREAMED = Symbol("streamed");

async function existingDir(dir: string, field: string): Promise<string> {
  const st = await stat(dir).catch(() => null);
  if (!st?.isDirectory()) throw new AgentError("not_found", `${field}: no directory there`, field);
  return dir;
}

async function sandboxRoot(options: AgentOptions, header: string | string[] | undefined): Promise<{ root: SandboxRoot; sandboxId: string }> {
  if (!options.sandboxesDir) return { root: { hostRoot: "/" }, sandboxId: typeof header === "string" ? header : "self" };
  const id = parse(P.SANDBOX_ID, header, P.SANDBOX_HEADER);
  const hostRoot = join(options.sandboxesDir, id);
  // A fresh sandbox starts with its allowed roots present, as the image has them.
  await mkdir(join(hostRoot, "workspace"), { recursive: true });
  await mkdir(join(hostRoot, "snapflow"), { recursive: true });
  return { root: { hostRoot }, sandboxId: id };
}
