// Manifests as files: the single-pass archiver writes the manifest it made into the sandbox (the Worker copies it
// to the store after the archive), and a restore or incremental reads the expected or base manifest from a
// sandbox file or straight from the store over a presigned GET (so the Worker stays out of the byte path; a
// 30k-file manifest is about 5 MB of JSON). A stored manifest whose SHA-256 the record keeps is checked on arrival;
// an overlay delta's layer manifest (version 2) is applied to its base's, fetched beside it.
//
// A whole manifest (version 1) is read as a stream (manifest-stream.ts): `openManifest` answers a reader whose
// entries a pass consumes one at a time, as often as it needs them (a stored one is spooled to a sandbox file first,
// hashed as it arrives, so a restore's in-stream check and its walk read it twice without fetching it twice).
// A layer and the layers under it are read whole (each bounded by SNAPFLOW_MAX_MANIFEST_BYTES; honest ones hold what
// changed) and applied to the base as it streams.
import { createHash } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import { mkdir, open, readFile, rm, stat, writeFile, type FileHandle } from "node:fs/promises";
import { dirname } from "node:path";
import { pipeline } from "node:stream/promises";
import type { z } from "zod";
import { AgentError } from "../http/agent-error.ts";
import { applyLayer, applyLayerStream } from "./manifest-layer.ts";
import { readBodyBounded } from "../contract/bounded-body.ts";
import { DEFAULT_MAX_MANIFEST_BYTES } from "../contract/manifest-limits.ts";
import { checkUrl } from "../transfer/check-url.ts";
import { LayerManifestSchema, ManifestSchema, type LayerManifest, type Manifest, type ManifestEntry } from "../contract/protocol.ts";
import { manifestBatches, type ManifestHead } from "./manifest-stream.ts";
import { manifestFromIndex, type FromIndex } from "./manifest-from-index.ts";

type Stored = { url: string; sha256?: string };
/**
 * A layer (version 2) names its base's manifest beside it: the tree's manifest is the base with the layer applied;
 * in a chain of overlay deltas, the layers between (`under`, oldest first) are applied to the base before it. A
 * file-level snapshot's is made from its index (manifest-from-index.ts), as a base too (an overlay delta over one).
 */
export type ManifestSource = { file: string } | FromIndex | (Stored & { base?: Stored | FromIndex; under?: Stored[] });

/** Writes the manifest as JSON; answers its size in bytes. */
export async function writeManifest(file: string, manifest: Manifest): Promise<number> {
  return (await writeManifestHashed(file, manifest)).bytes;
}

/** Writes a manifest (whole or a layer) as JSON; answers its size and SHA-256, which the record keeps. */
export async function writeManifestHashed(file: string, manifest: Manifest | LayerManifest): Promise<{ bytes: number; sha256: string }> {
  const text = Buffer.from(JSON.stringify(manifest));
  await mkdir(dirname(file), { recursive: true });
  await writeFile(file, text);
  return { bytes: text.byteLength, sha256: createHash("sha256").update(text).digest("hex") };
}

/** A manifest file in the sandbox, refused by its size when it passes the bound. */
async function checkedFile(file: string, field: string): Promise<string> {
  const size = (await stat(file).catch(() => null))?.size;
  if (size === undefined) throw new AgentError("not_found", `${field}.file: no manifest file there`, `${field}.file`);
  const limit = agentManifestByteLimit();
  if (size > limit) throw new AgentError("bad_request", `${field}.file: the manifest is ${size} bytes, more than this agent reads (${limit}: SNAPFLOW_MAX_MANIFEST_BYTES)`, `${field}.file`);
  return file;
}

async function get(source: Stored, field: string): Promise<Response> {
  const r = await fetch(checkUrl(source.url, `${field}.url`)).catch((e: Error) => {
    throw new AgentError("tool_failed", `${field}.url: GET failed: ${e.message}`);
  });
  if (!r.ok) throw new AgentError(r.status === 404 ? "not_found" : "tool_failed", `${field}.url: GET answered ${r.status}`, `${field}.url`);
  return r;
}

async function readText(source: { file: string } | Stored, field: string): Promise<string> {
  if ("file" in source) return readFile(await checkedFile(source.file, field), "utf8");
  const r = await get(source, field);
  const bytes = await readBounded(r, agentManifestByteLimit(), field);
  // The record keeps the SHA-256 of a manifest the store was made to check on the way in: the same bytes, or none.
  if (source.sha256 !== undefined) {
    const got = createHash("sha256").update(bytes).digest("hex");
    if (got !== source.sha256) throw new AgentError("verify_failed", `${field}: the stored manifest has sha256 ${got}, its snapshot's record says ${source.sha256}`, field);
  }
  return bytes.toString("utf8");
}

/** The agent's bound on a manifest it reads: SNAPFLOW_MAX_MANIFEST_BYTES, else the default (manifest-limits.ts). */
export function agentManifestByteLimit(env: Record<string, string | undefined> = process.env): number {
  const n = Number(env.SNAPFLOW_MAX_MANIFEST_BYTES);
  return Number.isSafeInteger(n) && n > 0 ? n : DEFAULT_MAX_MANIFEST_BYTES;
}

/**
 * The body, refused as soon as it passes `limit` bytes (a stated length above it refuses it before a byte is read):
 * a manifest is a sandbox's choice, and the agent's memory must not be (manifest-limits.ts).
 */
async function readBounded(r: Response, limit: number, field: string): Promise<Buffer> {
  const got = await readBodyBounded(r, limit);
  if ("over" in got) {
    throw new AgentError("bad_request", `${field}: the stored manifest is ${got.stated ? got.over : `over ${limit}`} bytes, more than this agent reads (${limit}: SNAPFLOW_MAX_MANIFEST_BYTES)`, field);
  }
  return Buffer.from(got.bytes.buffer, got.bytes.byteOffset, got.bytes.byteLength);
}

function parsed<T extends z.ZodType>(schema: T, json: unknown, field: string): z.infer<T> {
  const result = schema.safeParse(json);
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  throw new AgentError("bad_request", `${field}: not a manifest (${issue.path.join(".")}: ${issue.message})`, field);
}

/** A stored layer manifest (version 2), validated; undefined for a whole-tree manifest (an overlay delta from before layers). */
export async function loadLayerManifest(source: Stored, field: string): Promise<LayerManifest | undefined> {
  let json: unknown;
  try {
    json = JSON.parse(await readText(source, field));
  } catch (e) {
    if (e instanceof AgentError) throw e;
    throw new AgentError("bad_request", `${field}: not a JSON manifest`, field);
  }
  return (json as { version?: unknown } | null)?.version === 2 ? parsed(LayerManifestSchema, json, field) : undefined;
}

/** "over the bound" as the agent says it, whether a length was stated or the bytes passed it. */
function overBound(field: string, limit: number, stated?: number): AgentError {
  return new AgentError("bad_request", `${field}: the stored manifest is ${stated ?? `over ${limit}`} bytes, more than this agent reads (${limit}: SNAPFLOW_MAX_MANIFEST_BYTES)`, field);
}

/**
 * A stored manifest's bytes as they arrive, cut off once they pass the bound (a stated length above it is refused
 * before a byte is read); with the record's SHA-256, hashed as they pass and refused at the end when they differ.
 */
async function* storedBytes(source: Stored, field: string): AsyncGenerator<Uint8Array> {
  const limit = agentManifestByteLimit();
  const r = await get(source, field);
  const stated = Number(r.headers.get("content-length"));
  if (stated > limit) {
    await r.body?.cancel().catch(() => {});
    throw overBound(field, limit, stated);
  }
  const hash = createHash("sha256");
  const reader = r.body!.getReader();
  let total = 0;
  try {
    for (let next = await reader.read(); !next.done; next = await reader.read()) {
      total += next.value.byteLength;
      if (total > limit) throw overBound(field, limit);
      hash.update(next.value);
      yield next.value;
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
  const got = hash.digest("hex");
  if (source.sha256 !== undefined && got !== source.sha256) throw new AgentError("verify_failed", `${field}: the stored manifest has sha256 ${got}, its snapshot's record says ${source.sha256}`, field);
}

async function* fileBytes(file: string, field: string): AsyncGenerator<Uint8Array> {
  const limit = agentManifestByteLimit();
  let total = 0;
  for await (const chunk of createReadStream(file, { highWaterMark: 256 * 1024 })) {
    total += (chunk as Buffer).length;
    if (total > limit) throw new AgentError("bad_request", `${field}.file: the manifest passes ${limit} bytes, more than this agent reads (SNAPFLOW_MAX_MANIFEST_BYTES)`, `${field}.file`);
    yield chunk as Buffer;
  }
}

/**
 * A manifest's entries, read as a stream each time a pass asks, in batches of a chunk's worth (validated one by
 * one: manifest-stream.ts).
 */
export interface ManifestReader {
  batches(): AsyncGenerator<ManifestEntry[]>;
  /** lets go of a spooled copy (its descriptor); the request's end calls it */
  close?(): Promise<void>;
}

/** A manifest already held, as a reader. */
export const readerOf = (m: Manifest): ManifestReader => ({
  async *batches() {
    yield m.entries;
  },
});

/**
 * A manifest to read as a stream. A stored one is spooled to `spool` as it arrives, bounded and hashed, then read
 * through a descriptor with the name removed (the caller closes it: `close`), so its passes read the sandbox's copy;
 * without `spool` each pass fetches it again.
 * A layer and its chain are read whole and applied (loadManifest).
 */
export async function openManifest(source: ManifestSource, field: string, spool?: string): Promise<ManifestReader> {
  if ("file" in source) {
    const file = await checkedFile(source.file, field);
    return { batches: () => manifestBatches(fileBytes(file, field), field) };
  }
  if ("index" in source) return heldOnce(source.out, () => manifestFromIndex(source, field), field);
  if (source.base) {
    // A layer (and the layers below it) is held; the base streams through them (manifest-layer.ts applyLayerStream).
    const top = await loadLayerManifest(source, field);
    if (!top) return readerOf(await loadManifest(source, field)); // a whole manifest beside a base: an overlay delta from before layers
    const under = await Promise.all((source.under ?? []).map((stored, i) => loadLayerManifest(stored, `${field}.under[${i}]`)));
    const layers = under.map((below, i) => {
      if (!below) throw new AgentError("bad_request", `${field}.under[${i}]: not a layer manifest (version 2)`, `${field}.under[${i}]`);
      return below;
    });
    const base = await openManifest({ ...source.base }, `${field}.base`, spool === undefined ? undefined : `${spool}.base`);
    return {
      batches() {
        let tree = base.batches();
        for (const layer of [...layers, top]) tree = applyLayerStream(tree, layer, field);
        return tree;
      },
      close: async () => base.close?.(),
    };
  }
  if (!spool) return { batches: () => manifestBatches(storedBytes(source, field), field) };
  return heldOnce(spool, () => pipeline(storedBytes(source, field), createWriteStream(spool)), field);
}

/**
 * A manifest written to `file` once (spooled from the store, or made from an index), then read through a descriptor:
 * the name goes at once, so nothing is left in staging however long the request lives (a restore step abandoned by
 * the Worker can outlive its retry) or if the agent dies.
 */
async function heldOnce(file: string, write: () => Promise<unknown>, field: string): Promise<ManifestReader> {
  await mkdir(dirname(file), { recursive: true });
  let held: FileHandle;
  try {
    await write();
    held = await open(file, "r");
  } finally {
    await rm(file, { force: true });
  }
  return { batches: () => manifestBatches(handleBytes(held, field), field), close: () => held.close().catch(() => {}) };
}

/** A spooled copy's bytes, read from its descriptor from the start (positional reads: it may be read again). */
async function* handleBytes(fh: FileHandle, field: string): AsyncGenerator<Uint8Array> {
  const limit = agentManifestByteLimit();
  for (let at = 0; ; ) {
    const buffer = Buffer.allocUnsafe(256 * 1024);
    const { bytesRead } = await fh.read(buffer, 0, buffer.length, at);
    if (bytesRead === 0) return;
    at += bytesRead;
    if (at > limit) throw new AgentError("bad_request", `${field}: the manifest passes ${limit} bytes, more than this agent reads (SNAPFLOW_MAX_MANIFEST_BYTES)`, field);
    yield buffer.subarray(0, bytesRead);
  }
}

/** A whole manifest (version 1) read through the stream: its entries held, not its text and a parse tree too. */
async function collected(bytes: AsyncIterable<Uint8Array>, field: string): Promise<Manifest> {
  const entries: ManifestEntry[] = [];
  let head: ManifestHead | undefined;
  for await (const batch of manifestBatches(bytes, field, (h) => (head = h))) for (const e of batch) entries.push(e);
  return { version: 1, entries, totals: head!.totals, ...(head!.selection ? { selection: head!.selection } : {}) };
}

/** Reads and validates a manifest, applying a layer to its base; `field` names the request field in errors. */
export async function loadManifest(source: ManifestSource, field: string): Promise<Manifest> {
  if ("file" in source) return collected(fileBytes(await checkedFile(source.file, field), field), field);
  if ("index" in source) {
    try {
      await mkdir(dirname(source.out), { recursive: true });
      await manifestFromIndex(source, field);
      return await collected(fileBytes(source.out, field), field);
    } finally {
      await rm(source.out, { force: true });
    }
  }
  if (!source.base) return collected(storedBytes(source, field), field);
  const text = await readText(source, field);
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new AgentError("bad_request", `${field}: not a JSON manifest`, field);
  }
  if ((json as { version?: unknown } | null)?.version !== 2) return parsed(ManifestSchema, json, field);
  const layer = parsed(LayerManifestSchema, json, field);
  // The base is a whole manifest (the chain's image); each layer below this one is applied to it in turn, oldest first.
  // Fetched at once (each is small but one round trip), applied in order.
  const under = source.under ?? [];
  const [base, ...layers] = await Promise.all([loadManifest({ ...source.base }, `${field}.base`), ...under.map((stored, i) => loadLayerManifest(stored, `${field}.under[${i}]`))]);
  let tree = base as Manifest;
  for (const [i, below] of layers.entries()) {
    if (!below) throw new AgentError("bad_request", `${field}.under[${i}]: not a layer manifest (version 2)`, `${field}.under[${i}]`);
    tree = applyLayer(tree, below as LayerManifest);
  }
  return applyLayer(tree, layer);
}
