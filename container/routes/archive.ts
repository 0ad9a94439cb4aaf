// Routes that turn a tree into an archive and back: GET /v1/archive streams the archiver's stdout as the
// response body (tar, optionally through zstd/gzip/pigz/lz4), POST /v1/archive writes it to a file in the sandbox;
// PUT /v1/extract pipes the request body into the extractor, POST /v1/extract extracts a file already there.
import { randomUUID } from "node:crypto";
import { rm, stat } from "node:fs/promises";
import { AgentError } from "../http/agent-error.ts";
import { archiveToFile, archiveToStream, archiveWithManifest, archiveWithManifestToFile } from "../archive/archive.ts";
import { extractFromFile, extractFromStream, type ExtractVerification } from "../extract/extract.ts";
import { agentManifestByteLimit, loadManifest, openManifest, type ManifestReader, type ManifestSource } from "../manifest/manifest-file.ts";
import { manifestFromIndex, type FromIndex } from "../manifest/manifest-from-index.ts";
import { fetchKept } from "../manifest/manifest-kept-fetch.ts";
import { engineBinary, preferredEngine } from "../archive/engine-pass.ts";
import { extractSafely } from "../extract/safe-extract.ts";
import * as P from "../contract/protocol.ts";
import { SANDBOX_DIRS, stagingPath } from "../contract/sandbox-layout.ts";
import { keptFile, keptManifest } from "../manifest/manifest-kept.ts";
import { writeSelectedList } from "../archive/selection.ts";
import { existingDir, STREAMED, type Ctx, type Routes } from "./route.ts";
import { checkedChain } from "./index-chain.ts";
import { requestedSelection } from "./selection-request.ts";

/** A manifest named in a request (sandbox file or presigned URL), read and validated; undefined when not named. */
export async function requestedManifest(c: Ctx, source: P.ManifestSource | undefined, field: string): Promise<P.Manifest | undefined> {
  if (!source) return undefined;
  if ("file" in source) return loadManifest({ file: await c.path(source.file, `${field}.file`) }, field);
  // A manifest made from an index is written here first (loadManifest removes it).
  return loadManifest(agentSource(c, source, field, await c.path(stagingPath(`manifest-${randomUUID()}`, "json"), field)), field);
}

/** A manifest made from a file-level index (manifest-from-index.ts), written at `out`; its URL only on the store's origin. */
const fromIndexSource = (c: Ctx, s: P.IndexManifest, field: string, out: string): FromIndex =>
  ({ index: { url: c.storeUrl(s.index.url, `${field}.index.url`), sha256: s.index.sha256, ...checkedChain(c, s.index.chain, `${field}.index`) }, sha256: s.sha256, ...(s.selection ? { selection: s.selection } : {}), out });

/**
 * A stored or index-made manifest source as the agent reads it: a URL only on the store's origin; a manifest made
 * from a file-level index is written at `spool` (a staging file of the request's), a base made so beside it.
 */
function agentSource(c: Ctx, source: Exclude<P.ManifestSource, { file: string }>, field: string, spool: string): ManifestSource {
  const stored = (s: { url: string; sha256?: string }, at: string) => ({ url: c.storeUrl(s.url, `${at}.url`), ...(s.sha256 ? { sha256: s.sha256 } : {}) });
  if ("index" in source) return fromIndexSource(c, source, field, spool);
  const under = source.under?.map((u, i) => stored(u, `${field}.under[${i}]`));
  const base = source.base && ("index" in source.base ? fromIndexSource(c, source.base, `${field}.base`, `${spool}.base`) : stored(source.base, `${field}.base`));
  return { ...stored(source, field), ...(base ? { base } : {}), ...(under?.length ? { under } : {}) };
}

/**
 * A single pass's base: the copy this sandbox kept of it when that is the one the Worker names (id and SHA-256 from
 * the base's record), else the store's (and its chain); and where this backup keeps its own manifest. The base is
 * answered as a function the agent's pass calls as it starts its walk (read meanwhile; a failure to read it fails the
 * archive), and the kept copy's file when there is one, which the native engine reads and checks itself.
 */
export async function deltaBase(c: Ctx, source: P.ManifestSource | undefined, field: string, q: { baseKept?: { id: string; sha256: string }; keepAs?: string }) {
  const dir = q.baseKept || q.keepAs ? await c.path(SANDBOX_DIRS.manifests, "keepAs") : undefined;
  let from: "kept" | "store" | undefined;
  const read = async () => {
    const kept = dir && q.baseKept ? await keptManifest(dir, q.baseKept.id, q.baseKept.sha256) : undefined;
    from = kept ? "kept" : "store";
    return kept ?? (await requestedManifest(c, source, field))!;
  };
  const keptCopy = source && dir && q.baseKept ? keptFile(dir, q.baseKept.id) : undefined;
  let baseKept = keptCopy && (await stat(keptCopy).catch(() => null))?.isFile() ? { file: keptCopy, sha256: q.baseKept!.sha256 } : undefined;
  // Not kept here (a fresh container), but stored whole with the SHA-256 the record names: fetched into the kept place
  // for the engine, which checks it (manifest-kept-fetch.ts). Only when the engine will make the pass: the agent's
  // own pass reads the store's copy itself.
  if (!baseKept && keptCopy && source && "url" in source && !source.base && !source.under?.length && source.sha256 === q.baseKept!.sha256 && preferredEngine() === "native" && (await engineBinary())) {
    if (await fetchKept(c.storeUrl(source.url, `${field}.url`), keptCopy, agentManifestByteLimit())) {
      baseKept = { file: keptCopy, sha256: q.baseKept!.sha256 };
      from = "store";
    }
  }
  // A file-level base has no stored manifest: the engine makes it from the base's index into the kept place, checked
  // against the same SHA-256 (manifest-from-index.ts); a failure leaves the agent's pass to read it as the source says.
  if (!baseKept && keptCopy && source && "index" in source && source.sha256 === q.baseKept!.sha256 && preferredEngine() === "native" && (await engineBinary())) {
    const made = await manifestFromIndex(fromIndexSource(c, source, field, keptCopy), field).then(() => true, () => false);
    if (made) {
      baseKept = { file: keptCopy, sha256: q.baseKept!.sha256 };
      from = "store";
    }
  }
  return { base: source ? read : undefined, baseKept, baseFrom: () => from, keep: dir && q.keepAs ? { dir, id: q.keepAs } : undefined };
}

/**
 * A manifest named in a request, to be read as a stream by each pass that uses it; a stored one is spooled to a
 * staging file as it arrives (checked against its record's SHA-256), removed when the request ends.
 */
export async function requestedManifestReader(c: Ctx, source: P.ManifestSource | undefined, field: string): Promise<ManifestReader | undefined> {
  if (!source) return undefined;
  if ("file" in source) return openManifest({ file: await c.path(source.file, `${field}.file`) }, field);
  const spool = await c.path(stagingPath(`manifest-${randomUUID()}`, "json"), field);
  // The base of a layer is spooled beside it (manifest-file.ts openManifest); each spool's name goes once it is
  // written (read by descriptor), or here if the request ends while it is being written.
  let reader: ManifestReader | undefined;
  c.res.once("close", () => void Promise.all([rm(spool, { force: true }), rm(`${spool}.base`, { force: true }), reader?.close?.()]).catch(() => {}));
  reader = await openManifest(agentSource(c, source, field, spool), field, spool);
  // Ended while it was opening: close now (the close listener saw no reader yet).
  if (c.res.closed) await reader.close?.();
  return reader;
}

/** The in-stream check a restore request asks for, if any. */
export async function requestedVerification(c: Ctx, e: { expected?: P.ManifestSource; complete?: boolean; walk?: boolean }, field: string): Promise<ExtractVerification | undefined> {
  const expected = await requestedManifestReader(c, e.expected, field);
  return expected ? { expected, complete: e.complete, walk: e.walk } : undefined;
}

function oneOf(a: string | undefined, b: string | undefined, names: string): P.ManifestSource | undefined {
  if (a !== undefined && b !== undefined) throw new AgentError("bad_request", `give at most one of ${names}`, names.split(" ")[0]);
  return a !== undefined ? { file: a } : b !== undefined ? { url: b } : undefined;
}

export function singlePassOnly(q: { manifestOut?: string; filesFrom?: string; base?: unknown; rehash?: boolean }) {
  if (q.manifestOut !== undefined && q.filesFrom !== undefined) throw new AgentError("bad_request", "filesFrom: a single-pass archive finds its own list (give base instead)", "filesFrom");
  if (q.manifestOut === undefined && (q.base !== undefined || q.rehash !== undefined)) throw new AgentError("bad_request", "manifestOut: base and rehash need a single-pass archive", "manifestOut");
}

/** With a selection and no list of its own, tar archives the selected entries: their list, in a staging file. */
async function selectedList(c: Ctx, dir: string): Promise<string | undefined> {
  const selection = await requestedSelection(c, dir);
  if (!selection) return undefined;
  const list = await c.path(stagingPath(`selection-${randomUUID()}`, "list"), "filesFrom");
  await writeSelectedList(dir, selection, list);
  return list;
}

export const archiveRoutes: Routes = {
  "GET /v1/archive": async (c) => {
    const q = c.query(P.ArchiveQuery);
    const dir = await existingDir(await c.path(q.path, "path"), "path");
    if (q.baseSource !== undefined && (q.baseFile !== undefined || q.baseUrl !== undefined)) throw new AgentError("bad_request", "give at most one of baseFile baseUrl baseSource", "baseSource");
    const baseSource = q.baseSource ?? oneOf(q.baseFile, q.baseUrl, "baseFile baseUrl");
    singlePassOnly({ ...q, base: baseSource });
    if (q.layerOver !== undefined && baseSource === undefined) throw new AgentError("bad_request", "layerOver: a layer manifest needs a base (baseSource)", "layerOver");
    if (q.manifestOut !== undefined) {
      const manifestOut = await c.path(q.manifestOut, "manifestOut");
      const resultOut = q.resultOut === undefined ? undefined : await c.path(q.resultOut, "resultOut");
      const { base, baseKept, baseFrom, keep } = await deltaBase(c, baseSource, q.baseFile !== undefined ? "baseFile" : q.baseUrl !== undefined ? "baseUrl" : "baseSource", q);
      const selection = await requestedSelection(c, dir);
      c.res.writeHead(200, { "content-type": "application/octet-stream" });
      await archiveWithManifest(dir, q, c.res, { manifestOut, base, baseKept, baseFrom, rehash: q.rehash, layerOver: q.layerOver, resultOut, selection, ...(keep ? { keep } : {}) });
      return STREAMED;
    }
    const filesFrom = q.filesFrom === undefined ? await selectedList(c, dir) : await c.path(q.filesFrom, "filesFrom");
    try {
      c.res.writeHead(200, { "content-type": "application/octet-stream" });
      await archiveToStream(dir, q, c.res, filesFrom);
    } finally {
      if (q.filesFrom === undefined && filesFrom) await rm(filesFrom, { force: true });
    }
    return STREAMED;
  },

  "POST /v1/archive": async (c) => {
    const body = await c.json(P.ArchiveToFile);
    const dir = await existingDir(await c.path(body.path, "path"), "path");
    singlePassOnly(body);
    if (body.manifestOut !== undefined) {
      const manifestOut = await c.path(body.manifestOut, "manifestOut");
      if (body.layerOver !== undefined && !body.base) throw new AgentError("bad_request", "layerOver: a layer manifest needs a base", "layerOver");
      const { base, baseKept, baseFrom, keep } = await deltaBase(c, body.base, "base", body);
      return archiveWithManifestToFile(dir, body.format, await c.path(body.output, "output"), { manifestOut, base, baseKept, baseFrom, rehash: body.rehash, layerOver: body.layerOver, selection: await requestedSelection(c, dir), ...(keep ? { keep } : {}) });
    }
    const filesFrom = body.filesFrom === undefined ? await selectedList(c, dir) : await c.path(body.filesFrom, "filesFrom");
    try {
      return await archiveToFile(dir, body.format, await c.path(body.output, "output"), filesFrom);
    } finally {
      if (body.filesFrom === undefined && filesFrom) await rm(filesFrom, { force: true });
    }
  },

  "PUT /v1/extract": async (c) => {
    const q = c.query(P.ExtractQuery);
    if (q.expectedSource !== undefined && (q.expectedFile !== undefined || q.expectedUrl !== undefined)) throw new AgentError("bad_request", "give at most one of expectedFile expectedUrl expectedSource", "expectedSource");
    const expected = q.expectedSource ?? oneOf(q.expectedFile, q.expectedUrl, "expectedFile expectedUrl");
    const verify = await requestedVerification(c, { expected, complete: q.complete, walk: q.walk }, q.expectedFile !== undefined ? "expectedFile" : q.expectedUrl !== undefined ? "expectedUrl" : "expectedSource");
    const dir = await c.path(q.path, "path");
    // Through a staging directory, never through a symlink already in the target (safe-extract.ts).
    return extractSafely(dir, verify, (into, v) => (v ? extractFromStream(c.req, q, into, v) : extractFromStream(c.req, q, into)), { keepOwnership: q.keepOwnership });
  },

  "POST /v1/extract": async (c) => {
    const body = await c.json(P.ExtractFile);
    const archive = await c.path(body.archive, "archive");
    if (!(await stat(archive).catch(() => null))?.isFile()) throw new AgentError("not_found", `no archive at ${body.archive}`, "archive");
    return extractSafely(await c.path(body.path, "path"), await requestedVerification(c, body, "expected"), (into, v) => extractFromFile(archive, body.format, into, v), { keepOwnership: body.keepOwnership });
  },
};
