// The default restore's reverse pass made by the native engine (`snapflow-lazy unpack`, native/lazy/internal/unpack):
// one process fetches the archive over its presigned URL (resuming by Range after a break), decompresses it, parses
// the tar, makes each entry beneath the staging root through directory descriptors, hashes every file as it is
// written and compares it with the manifest (which it fetches and checks itself), then walks what it made. The agent
// only starts it and reads its answer; no archive or manifest byte passes through Node.
//
//   presigned GET ──▶ snapflow-lazy unpack ──▶ the tree beneath staging      (stdin: one JSON line, the request)
//                       └──result JSON (fd 3)──▶ VerifiedExtract, or verify_failed naming the first differences
//
// Why: the agent's own restore (extract.ts) relays every byte through Node (fetch, SHA-256, node-tar's parse and a
// SHA-256 per file) beside zstd -d and GNU tar -x, then sanitizes and walks the tree from Node: on the npm workspace
// agent 4.4 + children 15.4 CPU-s against the floor's ~8.8 (results/peers-npm-workspace.md). It takes what the
// engine does alike: tar with zstd, a whole manifest (a layer's version-2 manifest needs its base's applied), the
// whole tree into an empty target (so the engine's walk of the staging tree is the walk of the result). An overlay
// delta's layer has no manifest of its own to check (its archive's SHA-256 is checked against its record): the engine
// makes it `unchecked`, into an empty layer directory. Otherwise, or without the binary (an image built without it,
// or one from before `unpack`), the agent's own restore runs.
import { readdir } from "node:fs/promises";
import { z } from "zod";
import { AgentError } from "../http/agent-error.ts";
import { agentManifestByteLimit } from "../manifest/manifest-file.ts";
import type { ManifestSource, TarFormat } from "../contract/protocol.ts";
import { storeIdleMs } from "../transfer/stall-deadline.ts";
import { verifyFailed } from "../manifest/tree-verify.ts";
import type { VerifiedExtract } from "./extract.ts";
import { askEngine } from "../system/engine-answer.ts";

/**
 * Which restore, and which download to a file (engine-get.ts), the agent makes when both could:
 * SNAPFLOW_UNPACK_ENGINE=node keeps its own (benchmarks compare the two).
 */
export function preferredUnpack(env: Record<string, string | undefined> = process.env): "native" | "node" {
  return env.SNAPFLOW_UNPACK_ENGINE === "node" ? "node" : "native";
}

/** The manifest as the engine reads it: a sandbox file, or the store's object with the SHA-256 its record keeps. */
export type EngineManifest = { file: string } | { url: string; sha256?: string };

/** What the engine is asked on its first stdin line (cmd/snapflow-lazy/unpack.go unpackRequest). */
export interface UnpackRequest {
  url: string;
  manifest: EngineManifest;
  /** the request field the manifest came in, for its errors */
  field: string;
  keepOwners: boolean;
}

/**
 * Whether the engine can make this restore: zstd, a whole tree checked and walked, a manifest that is not a layer
 * (no base or chain beside it) nor made from an index, into a target that is empty (or not there yet).
 */
export async function engineCanUnpack(format: TarFormat, e: { expected?: ManifestSource; complete?: boolean; walk?: boolean }, dir: string): Promise<boolean> {
  if (format.compression !== "zstd" || !e.expected || "index" in e.expected || ("url" in e.expected && (e.expected.base || e.expected.under?.length))) return false;
  if (e.complete === false || e.walk === false) return false;
  const names = await readdir(dir).catch((err: NodeJS.ErrnoException) => (err.code === "ENOENT" ? [] : null));
  return names !== null && names.length === 0;
}

const count = z.number().int().nonnegative();
const Difference = z.object({
  path: z.string(),
  kind: z.enum(["missing", "extra", "changed"]),
  fields: z.array(z.object({ name: z.string(), expected: z.unknown(), actual: z.unknown() })).optional(),
});
const Comparison = { equal: z.boolean(), counts: z.object({ missing: count, extra: count, changed: count }), differences: z.array(Difference) };
const Walked = z.object({ ...Comparison, entries: count, ms: count, owners: z.enum(["compared", "not-in-manifest"]).optional(), sparse: z.literal("compared").optional() });
const UnpackResult = z.object({
  ...Comparison,
  bytes: count,
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
  tarBytes: count,
  entries: count,
  ms: count,
  attempts: count,
  manifestMs: count,
  walked: Walked.optional(),
});
/** Whether the engine can make an unchecked layer (no manifest): zstd, into an empty target (or one not there yet). */
export async function engineCanUnpackLayer(format: TarFormat, dir: string): Promise<boolean> {
  if (format.compression !== "zstd") return false;
  const names = await readdir(dir).catch((err: NodeJS.ErrnoException) => (err.code === "ENOENT" ? [] : null));
  return names !== null && names.length === 0;
}


/** The snapflow-lazy here has no `unpack` subcommand: the caller makes the agent's own restore instead. */
export class EngineLacksUnpack extends Error {
  constructor() {
    super("snapflow-lazy here has no unpack subcommand");
  }
}

/**
 * Runs the engine into `staging` (an empty directory). Answers the extraction as the agent's own verified restore
 * does; throws the engine's error (its code and field), verify_failed naming the first differences of the archive
 * or of the walk, or EngineLacksUnpack.
 */
export async function unpackWithEngine(bin: string, staging: string, request: UnpackRequest): Promise<VerifiedExtract & { attempts: number }> {
  const started = performance.now();
  const r = await runUnpack(bin, staging, { ...request, complete: true, walk: true });
  if (!r.equal) throw verifyFailed("the archive's content", r);
  if (!r.walked) throw new AgentError("tool_failed", "snapflow-lazy unpack did not walk the tree it made");
  if (!r.walked.equal) throw verifyFailed("the restored tree", r.walked);
  return {
    bytes: r.bytes,
    sha256: r.sha256,
    ms: Math.round(performance.now() - started),
    verified: { content: "in-stream", entries: r.entries, metadata: "walk", walked: r.walked.entries, walkMs: r.walked.ms, ...(r.walked.owners ? { owners: r.walked.owners } : {}), engine: "native" },
    equal: true,
    attempts: r.attempts,
  };
}

/**
 * An overlay delta's layer by the engine, without a manifest (`unchecked`): every entry made as the archive has it
 * beneath `staging` (whiteouts kept, devices never made, set-id bits cleared unless owners are kept), as GNU tar and
 * the sanitize pass made it, in one process. The caller checks the archive's SHA-256 against its record.
 */
export async function unpackLayerWithEngine(bin: string, staging: string, request: { url: string; keepOwners: boolean }) {
  const started = performance.now();
  const r = await runUnpack(bin, staging, { ...request, unchecked: true });
  return { bytes: r.bytes, sha256: r.sha256, ms: Math.round(performance.now() - started), tarBytes: r.tarBytes, entries: r.entries, engine: "native" as const };
}

async function runUnpack(bin: string, staging: string, request: Record<string, unknown>) {
  const line = { ...request, idleSeconds: Math.max(1, Math.round(storeIdleMs() / 1000)), retries: 4, maxManifestBytes: agentManifestByteLimit() };
  // A binary from before `unpack`: the agent's own restore makes it.
  return askEngine([bin, "unpack", "--root", staging, "--result-fd", "3"], line, { result: UnpackResult, lacking: () => new EngineLacksUnpack() });
}
