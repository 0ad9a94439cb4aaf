// Routes where the agent talks to the object store itself, over presigned S3 URLs signed by the Worker: single
// PUT/GET (to or from a file, or GET piped into the extractor), parallel multipart upload streamed from the
// archiver or a file, parallel Range GETs (or aria2c), and hashing what a URL serves. Bytes flow between the
// sandbox and R2 directly; only the measured result comes back as JSON.
import { downloadAndExtract, downloadToFile, hashUrl, uploadFile } from "../transfer/presigned.ts";
import { uploadMultipart, type MultipartSource } from "../transfer/presigned-multipart.ts";
import { downloadRangedAndExtract, downloadRangedToFile, downloadWithAria2c } from "../transfer/presigned-ranged.ts";
import type { z } from "zod";
import * as P from "../contract/protocol.ts";
import { extractSafely } from "../extract/safe-extract.ts";
import { markDirs, opaqueDirsOf } from "../mounts/overlay-opaque.ts";
import { deltaBase, requestedVerification, singlePassOnly } from "./archive.ts";
import { AgentError } from "../http/agent-error.ts";
import { engineBinary } from "../archive/engine-pass.ts";
import { EngineLacksUnpack, engineCanUnpack, engineCanUnpackLayer, preferredUnpack, unpackLayerWithEngine, unpackWithEngine, type EngineManifest } from "../extract/engine-unpack.ts";
import { existingDir, type Ctx, type Routes } from "./route.ts";
import { requestedSelection } from "./selection-request.ts";
import { SANDBOX_DIRS } from "../contract/sandbox-layout.ts";
import { treeSize } from "../transfer/tree-size.ts";
import { ENGINE_GET_MIN_BYTES, EngineLacksGet, getWithEngine } from "../transfer/engine-get.ts";

/**
 * An upload's archive source: with manifestOut, single pass (the walk, less the request's selection, names tar's
 * entries and the manifest comes from the stream), as GET /v1/archive makes a backup's archive; with base, a delta
 * of it, as GET /v1/archive makes one (its kept copy here when it is the one baseKept names, else the store's).
 */
async function archiveSource(c: Ctx, archive: Extract<P.UploadMultipartBody["source"], { archive: unknown }>["archive"]): Promise<MultipartSource> {
  const dir = await existingDir(await c.path(archive.path, "source.archive.path"), "source.archive.path");
  singlePassOnly(archive);
  if (archive.layerOver !== undefined && !archive.base) throw new AgentError("bad_request", "source.archive.layerOver: a layer manifest needs a base (source.archive.base)", "source.archive.layerOver");
  if (archive.manifestOut === undefined) return { archive: { dir, format: archive.format } };
  const manifestOut = await c.path(archive.manifestOut, "source.archive.manifestOut");
  // keepAs: the tree's manifest stays in the sandbox for the next delta, as GET /v1/archive keeps it.
  const { base, baseKept, baseFrom, keep } = await deltaBase(c, archive.base, "source.archive.base", archive);
  const delta = base ? { base, baseFrom, ...(baseKept ? { baseKept } : {}), ...(archive.layerOver ? { layerOver: archive.layerOver } : {}), ...(archive.rehash ? { rehash: true } : {}) } : {};
  return { archive: { dir, format: archive.format, singlePass: { manifestOut, selection: await requestedSelection(c, dir), ...(keep ? { keep } : {}), ...delta } } };
}

/**
 * The default restore by the native engine (engine-unpack.ts), into a staging directory as every extraction; or
 * undefined when the engine cannot make it (then the agent's own restore runs).
 */
async function engineDownload(c: Ctx, url: string, e: Extract<z.infer<typeof P.DownloadBody>, { extract: unknown }>["extract"]) {
  const dir = await c.path(e.path, "extract.path");
  const bin = preferredUnpack() === "native" ? await engineBinary() : null;
  if (!bin) return undefined;
  // Into a staging directory as every extraction; a binary without `unpack` leaves it to the agent's own restore.
  const byEngine = <T extends object>(run: (into: string) => Promise<T>) =>
    extractSafely(dir, undefined, run, { keepOwnership: e.keepOwnership, madeClean: true }).catch((err) => {
      if (err instanceof EngineLacksUnpack) return undefined;
      throw err;
    });
  const keepOwners = e.keepOwnership ?? false;
  // No manifest (an overlay delta's layer: the caller checks the archive's SHA-256 against its record): made as the
  // archive has it, in one native process, where GNU tar, zstd, Node's hashing and the sanitize pass each took a turn
  // (a wake's 10 MB delta: 0.10-0.15 s in the agent's tar alone, 0.05-0.08 s by the engine; sleep-wake probes).
  if (!e.expected) return (await engineCanUnpackLayer(e.format, dir)) ? byEngine((into) => unpackLayerWithEngine(bin, into, { url, keepOwners })) : undefined;
  const source = e.expected;
  if ("index" in source || !(await engineCanUnpack(e.format, e, dir))) return undefined;
  const manifest: EngineManifest = "file" in source
    ? { file: await c.path(source.file, "extract.expected.file") }
    : { url: c.storeUrl(source.url, "extract.expected.url"), ...(source.sha256 ? { sha256: source.sha256 } : {}) };
  return byEngine((into) => unpackWithEngine(bin, into, { url, manifest, field: "extract.expected", keepOwners }));
}

/** One GET to a file: by the native engine (engine-get.ts) where it can and the object is large, else through Node. */
async function downloadFile(url: string, output: string, size?: number) {
  const bin = preferredUnpack() === "native" && (size === undefined || size >= ENGINE_GET_MIN_BYTES) ? await engineBinary() : null;
  const byEngine = bin ? await getWithEngine(bin, url, output).catch((err) => (err instanceof EngineLacksGet ? undefined : Promise.reject(err))) : undefined;
  return byEngine ?? downloadToFile(url, output);
}

export const transferRoutes: Routes = {
  "POST /v1/hash-url": async (c) => {
    const body = await c.json(P.HashUrlBody);
    return hashUrl(c.storeUrl(body.url, "url"));
  },

  "POST /v1/upload": async (c) => {
    const body = await c.json(P.UploadBody);
    return uploadFile(await c.path(body.path, "path"), c.storeUrl(body.url, "url"), body.createOnly);
  },

  "POST /v1/download": async (c) => {
    const body = await c.json(P.DownloadBody);
    c.storeUrl(body.url, "url");
    if ("output" in body) return downloadFile(body.url, await c.path(body.output, "output"), body.size);
    const { format, opaque } = body.extract;
    // A delta's layer manifest is fetched while its archive comes in; its opaque directories are marked once it is in.
    const dirs = opaque ? opaqueDirsOf({ ...opaque, url: c.storeUrl(opaque.url, "extract.opaque.url") }, "extract.opaque") : undefined;
    dirs?.catch(() => {}); // awaited below; a failed extraction answers first
    const made = (await engineDownload(c, body.url, body.extract)) ??
      // Through a staging directory, never through a symlink already in the target (safe-extract.ts).
      (await extractSafely(await c.path(body.extract.path, "extract.path"), await requestedVerification(c, body.extract, "extract.expected"), (into, v) => downloadAndExtract(body.url, format, into, v), { keepOwnership: body.extract.keepOwnership }));
    if (!dirs) return made;
    const { marked } = await markDirs(await c.path(body.extract.path, "extract.path"), await dirs);
    return { ...made, opaque: marked };
  },

  "POST /v1/tree-size": async (c) => {
    const body = await c.json(P.TreeSizeBody);
    return treeSize(await existingDir(await c.path(body.path, "path"), "path"));
  },

  "POST /v1/upload-multipart": async (c) => {
    const body = await c.json(P.UploadMultipartBody);
    body.urls.forEach((u, i) => c.storeUrl(u, `urls.${i}`));
    const source = "archive" in body.source ? await archiveSource(c, body.source.archive) : { file: await c.path(body.source.file, "source.file") };
    return uploadMultipart(source, { ...body, lie: c.agent.faults.lie(`${c.sandboxId} POST /v1/upload-multipart`) });
  },

  "POST /v1/download-ranged": async (c) => {
    const body = await c.json(P.DownloadRangedBody);
    c.storeUrl(body.url, "url");
    const o = { url: body.url, size: body.size, rangeSize: body.rangeSize, concurrency: body.concurrency, retries: body.retries };
    if (body.extract) {
      const { format } = body.extract;
      return extractSafely(await c.path(body.extract.path, "extract.path"), await requestedVerification(c, body.extract, "extract.expected"), (into, v) => downloadRangedAndExtract(o, format, into, v), { keepOwnership: body.extract.keepOwnership });
    }
    const output = await c.path(body.output, "output");
    return body.tool === "aria2c" ? downloadWithAria2c(o, output) : downloadRangedToFile(o, output);
  },
};
