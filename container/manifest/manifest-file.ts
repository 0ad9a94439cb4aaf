// Manifests as files: the single-pass archiver writes the manifest it made into the sandbox (the Worker copies it
// to the store after the archive), and a restore or incremental reads the expected or base manifest from a
// sandbox file or straight from the store over a presigned GET (so the Worker stays out of the byte path; a
// 30k-file manifest is about 5 MB of JSON). A stored manifest whose SHA-256 the record keeps is checked on arrival;
// an overlay delta's layer manifest (version 2) is applied to its base's, fetched beside it.
import { createHash } from "node:crypto";
import { mkdir, readFile, stat, writeFile } from "node:fs/promises";
import { dirname } from "node:path";
import type { z } from "zod";
import { AgentError } from "../http/agent-error.ts";
import { applyLayer } from "./manifest-layer.ts";
import { readBodyBounded } from "../contract/bounded-body.ts";
import { DEFAULT_MAX_MANIFEST_BYTES } from "../contract/manifest-limits.ts";
import { checkUrl } from "../transfer/presigned.ts";
import { LayerManifestSchema, ManifestSchema, type LayerManifest, type Manifest } from "../contract/protocol.ts";

type Stored = { url: string; sha256?: string };
/**
 * A layer (version 2) names its base's manifest beside it: the tree's manifest is the base with the layer applied;
 * in a chain of overlay deltas, the layers between (`under`, oldest first) are applied to the base before it.
 */
export type ManifestSource = { file: string } | (Stored & { base?: Stored; under?: Stored[] });

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

async function readText(source: { file: string } | Stored, field: string): Promise<string> {
  if ("file" in source) {
    const size = (await stat(source.file).catch(() => null))?.size;
    if (size === undefined) throw new AgentError("not_found", `${field}.file: no manifest file there`, `${field}.file`);
    const limit = agentManifestByteLimit();
    if (size > limit) throw new AgentError("bad_request", `${field}.file: the manifest is ${size} bytes, more than this agent reads (${limit}: SNAPFLOW_MAX_MANIFEST_BYTES)`, `${field}.file`);
    return readFile(source.file, "utf8");
  }
  const r = await fetch(checkUrl(source.url, `${field}.url`)).catch((e: Error) => {
    throw new AgentError("tool_failed", `${field}.url: GET failed: ${e.message}`);
  });
  if (!r.ok) throw new AgentError(r.status === 404 ? "not_found" : "tool_failed", `${field}.url: GET answered ${r.status}`, `${field}.url`);
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

/** Reads and validates a manifest, applying a layer to its base; `field` names the request field in errors. */
export async function loadManifest(source: ManifestSource, field: string): Promise<Manifest> {
  const text = await readText(source, field);
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new AgentError("bad_request", `${field}: not a JSON manifest`, field);
  }
  if ((json as { version?: unknown } | null)?.version !== 2) return parsed(ManifestSchema, json, field);
  const layer = parsed(LayerManifestSchema, json, field);
  if ("file" in source || !source.base) throw new AgentError("bad_request", `${field}: a layer manifest (over snapshot ${layer.base}) needs its base's manifest beside it (${field}.base)`, `${field}.base`);
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
