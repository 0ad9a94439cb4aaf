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
// children against 4.0–4.4 with the engine (native/lazy/MEASUREMENTS.md "pack"). It takes what the engine reads alike: tar with zstd, no base
// manifest (a delta keeps the agent's pass: it names a list, not a tree), a selection RE2 reads as JavaScript does.
// Without the binary (an image built without it) the agent's pass runs instead: same archive format, same manifest.
import { rm } from "node:fs/promises";
import type { Readable, Writable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { z } from "zod";
import { AgentError } from "../http/agent-error.ts";
import { ManifestTotals, type TarFormat } from "../contract/protocol.ts";
import { findOnPath } from "../system/find-on-path.ts";
import { startTool } from "../system/run-tool.ts";
import type { SinglePassOptions, SinglePassResult } from "./single-pass.ts";
import type { EngineSelection } from "./selection.ts";

/** Which pass the agent makes when both could: SNAPFLOW_PACK_ENGINE=node keeps its own (benchmarks compare the two). */
export function preferredEngine(env: Record<string, string | undefined> = process.env): "native" | "node" {
  return env.SNAPFLOW_PACK_ENGINE === "node" ? "node" : "native";
}

/** What the engine is asked on stdin (cmd/snapflow-lazy/pack.go packRequest). */
export interface EngineRequest {
  level?: number;
  threads?: number;
  long?: boolean;
  selection?: EngineSelection;
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
const EngineFailure = z.object({ error: z.object({ code: z.enum(["bad_request", "tool_failed"]), message: z.string(), field: z.string().optional() }) });

/** The engine's request for this pass, or undefined when the agent's own pass must make it. */
export function engineRequest(format: TarFormat, options: SinglePassOptions): EngineRequest | undefined {
  if (format.compression !== "zstd" || options.base || options.rehash) return undefined;
  const selection = options.selection?.engineRules();
  if (options.selection && !selection) return undefined;
  return { level: format.level, threads: format.threads, long: format.long, ...(selection ? { selection } : {}) };
}

/** The engine binary, or null when this sandbox has none (then the agent's own pass runs). */
export function engineBinary(): Promise<string | null> {
  return findOnPath("snapflow-lazy");
}

async function readAll(stream: Readable): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString("utf8");
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
    return settle(exited, flowed, said, relayed, tool.child.exitCode, started);
  } catch (e) {
    // The engine's half-written manifest has no name (O_TMPFILE) except on a filesystem without it; there the engine
    // removes it itself, unless it was killed outright (SIGKILL, the OOM killer).
    await rm(`${options.manifestOut}.tmp-${tool.child.pid}`, { force: true });
    throw e;
  }
}

/** The pass's outcome from the engine's exit, the relay and the engine's answer on fd 3. */
function settle(exited: PromiseSettledResult<void>, flowed: PromiseSettledResult<void>, said: PromiseSettledResult<string>, relayed: number, exitCode: number | null, started: number): SinglePassResult {
  const text = said.status === "fulfilled" ? said.value.trim() : "";
  const failure = text ? EngineFailure.safeParse(safeJson(text)) : undefined;
  if (failure?.success) throw new AgentError(failure.data.error.code, failure.data.error.message, failure.data.error.field);
  if (flowed.status === "rejected") {
    throw new AgentError("tool_failed", `the stream from snapflow-lazy pack: ${(flowed.reason as Error).message}`);
  }
  // A binary from before `pack` (a sandbox image older than the agent) answers its usage and exit 2 before a byte.
  if (exited.status === "rejected" && exitCode === 2 && relayed === 0 && !text) throw new EngineLacksPack();
  if (exited.status === "rejected") throw exited.reason;
  const parsed = EngineResult.safeParse(safeJson(text));
  if (!parsed.success) throw new AgentError("tool_failed", `snapflow-lazy pack answered what is not a result: ${text.slice(0, 200)}`);
  const r = parsed.data;
  if (r.bytes !== relayed) throw new AgentError("tool_failed", `snapflow-lazy pack says it wrote ${r.bytes} bytes; ${relayed} arrived`);
  return {
    bytes: r.bytes,
    sha256: r.sha256,
    ms: Math.round(performance.now() - started),
    manifest: { totals: r.totals, entries: r.entries, jsonBytes: r.jsonBytes, walkMs: r.walkMs, sha256: r.jsonSha256 },
    archived: { entries: r.entries, tarBytes: r.tarBytes },
    engine: "native",
  };
}

/** The snapflow-lazy here has no `pack` subcommand: the caller makes the agent's own pass instead. */
export class EngineLacksPack extends Error {
  constructor() {
    super("snapflow-lazy here has no pack subcommand");
  }
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
