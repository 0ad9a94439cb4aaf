// The default backup's single pass made by the native engine (`snapflow-lazy pack`, native/lazy/internal/pack): one
// process walks the tree, reads each file once, hashes it, writes the tar (PAX, GNU 1.0 sparse) through zstd and
// writes the manifest file; the agent only relays its stdout to `out` and counts it.
//
//   snapflow-lazy pack ──tar.zst (stdout)──▶ out            (no parse, no second hash: the engine reports the SHA-256)
//          │ └──manifest──▶ options.manifestOut
//          └──result JSON (fd 3)──▶ SinglePassResult
//
// Why: in the agent's own pass (archive.ts singlePassInto) every byte goes through tar, Node (node-tar parses it, SHA-256)
// and zstd, and the archive through a second SHA-256: on the npm workspace (550 MB) 5.7–6.0 CPU-s for the agent and its
// children against 4.0–4.4 with the engine (native/lazy/MEASUREMENTS.md "pack"). It takes what the engine reads alike: tar with zstd,
// a selection RE2 reads as JavaScript does, and for a delta a base the agent keeps (manifest-kept.ts): the engine
// reads that file itself, checks its SHA-256, walks and classifies natively (internal/pack/delta.go) and writes the
// layer manifest and the tree's whole one for the next delta. A kept base it finds unusable (changed on disk) fails
// before a byte, and the agent's pass makes the delta from the store's copy.
// Without the binary (an image built without it) the agent's pass runs instead: same archive format, same manifest.
import { rm } from "node:fs/promises";
import { keptFile } from "../manifest/manifest-kept.ts";
import type { Readable, Writable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { z } from "zod";
import { AgentError } from "../http/agent-error.ts";
import { ManifestTotals, type TarFormat } from "../contract/protocol.ts";
import { findOnPath } from "../system/find-on-path.ts";
import { startTool } from "../system/run-tool.ts";
import type { SinglePassOptions, SinglePassResult } from "./single-pass.ts";
import type { EngineSelection } from "./selection.ts";
import { readAll, safeJson } from "../system/engine-answer.ts";

/** Which pass the agent makes when both could: SNAPFLOW_PACK_ENGINE=node keeps its own (benchmarks compare the two). */
export function preferredEngine(env: Record<string, string | undefined> = process.env): "native" | "node" {
  return env.SNAPFLOW_PACK_ENGINE === "node" ? "node" : "native";
}

/** What the engine is asked on stdin (cmd/snapflow-lazy/pack.go packRequest; delta: internal/pack/delta.go Delta). */
export interface EngineRequest {
  level?: number;
  threads?: number;
  long?: boolean;
  selection?: EngineSelection;
  delta?: { base: string; sha256: string; layerOver?: string; keep?: string; rehash?: boolean };
}

const count = z.number().int().nonnegative();
export const EngineResult = z.object({
  bytes: count,
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
  tarBytes: count,
  entries: count,
  totals: ManifestTotals,
  jsonBytes: count,
  /** the manifest file's SHA-256, hashed by the engine as it wrote it */
  jsonSha256: z.string().regex(/^[0-9a-f]{64}$/),
  excluded: z.record(z.string(), count).nullable(),
  walkMs: count,
  ms: count,
});
/** A delta's answer adds what the agent's pass reports of one (SinglePassResult's delta, layerOf, treeSha256). */
export const EngineDeltaResult = EngineResult.extend({
  /** entries the archive holds */
  archived: count,
  layerOf: z.string().optional(),
  treeSha256: z.string().regex(/^[0-9a-f]{64}$/).optional(),
  delta: z.object({ changed: count, changedBytes: count, deleted: z.array(z.string()), suspects: count, suspectBytes: count, planMs: count }),
});
const EngineFailure = z.object({ error: z.object({ code: z.enum(["bad_request", "tool_failed", "base_unusable"]), message: z.string(), field: z.string().optional() }) });

/**
 * The engine's request for this pass, or undefined when the agent's own pass must make it. A delta's base must be a
 * kept copy (one read from the store is the agent's to read); the tree's whole manifest, when a layer is written
 * and the backup keeps it, is written beside the kept ones (`.engine`) and renamed into place once the pass is done.
 */
export function engineRequest(format: TarFormat, options: SinglePassOptions): EngineRequest | undefined {
  if (format.compression !== "zstd" || (options.base && !options.baseKept)) return undefined;
  const selection = options.selection?.engineRules();
  if (options.selection && !selection) return undefined;
  const request: EngineRequest = { level: format.level, threads: format.threads, long: format.long, ...(selection ? { selection } : {}) };
  if (options.baseKept) {
    const keep = options.keep && options.layerOver ? engineKeptFile(options.keep) : undefined;
    request.delta = { base: options.baseKept.file, sha256: options.baseKept.sha256, ...(options.layerOver ? { layerOver: options.layerOver } : {}), ...(keep ? { keep } : {}), ...(options.rehash ? { rehash: true } : {}) };
  }
  return request;
}

/** Where the engine writes the tree's whole manifest beside a layer: renamed to the kept one once the pass is done. */
export const engineKeptFile = (keep: { dir: string; id: string }) => `${keptFile(keep.dir, keep.id)}.engine`;

/** The engine binary, or null when this sandbox has none (then the agent's own pass runs). */
export function engineBinary(): Promise<string | null> {
  return findOnPath("snapflow-lazy");
}

/**
 * Runs the engine over `dir` into `out` (not ended: the caller ends it once the result is recorded). Rejects with the
 * engine's own error (a refused name: bad_request on `path`; a file changed while read: tool_failed naming it).
 */
export async function enginePass(bin: string, dir: string, request: EngineRequest, out: Writable, options: SinglePassOptions): Promise<SinglePassResult> {
  const started = performance.now();
  if (options.resultOut) await rm(options.resultOut, { force: true });
  const tool = startTool([bin, "pack", "--root", dir, "--manifest", options.manifestOut, "--result-fd", "3"], { stdin: "pipe", fd3: "pipe" });
  tool.child.stdin!.on("error", () => {}); // it died early: its exit says why
  tool.child.stdin!.end(JSON.stringify(request));
  // Awaited to its end, not to the engine's exit: under Bun, fd 3's data can arrive after the child's 'close' event.
  const answer = readAll(tool.child.stdio[3] as Readable);
  let relayed = 0;
  const stdout = tool.child.stdout!;
  // A relay, not a pipeline through a Transform: the pipe pauses the engine when `out` is full, a listener counts,
  // nothing else touches the bytes. `out` is ended by the caller, once the result is recorded.
  const relay = pipeline(stdout, out, { end: false });
  stdout.on("data", (chunk: Buffer) => (relayed += chunk.length));
  // `out` failed (the client hung up, the disk filled): stop the engine, whose full pipe would otherwise hold it.
  relay.catch(() => tool.child.exitCode === null && tool.child.kill("SIGTERM"));
  const [exited, flowed, said] = await Promise.allSettled([tool.done, relay, answer]);
  try {
    return settle(exited, flowed, said, relayed, tool.child.exitCode, started, request.delta !== undefined, options.baseFrom?.());
  } catch (e) {
    await removeEngineLeftovers(tool.child.pid!, options.manifestOut, request);
    throw e;
  }
}

/**
 * What a failed engine pass may leave: its half-written manifests, which have no name (O_TMPFILE) except on a
 * filesystem without it, where the engine removes them itself unless it was killed outright (SIGKILL, the OOM
 * killer); and a delta's tree manifest, written before the pass failed after it.
 */
export async function removeEngineLeftovers(pid: number, manifestOut: string, request: EngineRequest): Promise<void> {
  const kept = request.delta?.keep;
  for (const file of [manifestOut, kept]) if (file) await rm(`${file}.tmp-${pid}`, { force: true });
  if (kept) await rm(kept, { force: true });
}

/**
 * The pass's outcome from the engine's exit, the relay and the engine's answer on fd 3. When the relay failed (the
 * disk the archive goes to filled: ENOSPC), the engine's own "broken pipe" is only its consequence — which of the
 * two is seen first is a race — so the relay's error is the answer (toolAndFlow's rule for tools killed by SIGPIPE).
 */
export function settle(exited: PromiseSettledResult<void>, flowed: PromiseSettledResult<void>, said: PromiseSettledResult<string>, relayed: number, exitCode: number | null, started: number, delta: boolean, baseFrom?: "kept" | "store"): SinglePassResult {
  const text = said.status === "fulfilled" ? said.value.trim() : "";
  const failure = text ? EngineFailure.safeParse(safeJson(text)) : undefined;
  if (failure?.success && failure.data.error.code === "base_unusable" && relayed === 0) throw new EngineBaseUnusable(failure.data.error.message);
  const relayFailed = flowed.status === "rejected" ? new AgentError("tool_failed", `the stream from snapflow-lazy pack: ${(flowed.reason as Error).message}`) : undefined;
  if (relayFailed && (!failure?.success || /broken pipe|EPIPE/i.test(failure.data.error.message))) throw relayFailed;
  if (failure?.success) throw new AgentError(failure.data.error.code === "base_unusable" ? "tool_failed" : failure.data.error.code, failure.data.error.message, failure.data.error.field);
  // A binary from before `pack` (a sandbox image older than the agent) answers its usage and exit 2 before a byte.
  if (exited.status === "rejected" && exitCode === 2 && relayed === 0 && !text) throw new EngineLacksPack();
  if (exited.status === "rejected") throw exited.reason;
  const json = safeJson(text);
  const parsed = EngineResult.safeParse(json);
  const deltaParsed = delta ? EngineDeltaResult.safeParse(json) : undefined;
  if (!parsed.success || deltaParsed?.success === false) throw new AgentError("tool_failed", `snapflow-lazy pack answered what is not a result: ${text.slice(0, 200)}`);
  const r = parsed.data;
  if (r.bytes !== relayed) throw new AgentError("tool_failed", `snapflow-lazy pack says it wrote ${r.bytes} bytes; ${relayed} arrived`);
  const result: SinglePassResult = {
    bytes: r.bytes,
    sha256: r.sha256,
    ms: Math.round(performance.now() - started),
    manifest: { totals: r.totals, entries: r.entries, jsonBytes: r.jsonBytes, walkMs: r.walkMs, sha256: r.jsonSha256 },
    archived: { entries: r.entries, tarBytes: r.tarBytes },
    engine: "native",
  };
  return deltaParsed ? withDelta(result, deltaParsed.data!, baseFrom) : result;
}

/** A pass's result with what the engine answered of its delta (stream mode here, upload mode in engine-parts.ts). */
export function withDelta<R extends Pick<SinglePassResult, "manifest">>(result: R, d: z.infer<typeof EngineDeltaResult>, baseFrom: "kept" | "store" | undefined): R & Required<Pick<SinglePassResult, "archived" | "delta">> {
  return {
    ...result,
    manifest: { ...result.manifest, ...(d.layerOf ? { layerOf: d.layerOf } : {}), ...(d.treeSha256 ? { treeSha256: d.treeSha256 } : {}) },
    archived: { entries: d.archived, tarBytes: d.tarBytes },
    // Where the agent had the base file from: its kept copy, or the store's copy it fetched there (manifest-kept-fetch.ts).
    delta: { ...d.delta, baseFrom: baseFrom ?? "kept" },
  };
}

/** The engine found the kept base unusable (not the bytes its record vouches for) before writing a byte. */
export class EngineBaseUnusable extends Error {}

/** The snapflow-lazy here has no `pack` subcommand: the caller makes the agent's own pass instead. */
export class EngineLacksPack extends Error {
  constructor() {
    super("snapflow-lazy here has no pack subcommand");
  }
}

