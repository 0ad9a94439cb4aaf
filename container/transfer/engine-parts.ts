// The default backup's bytes with no relay: the native engine (`snapflow-lazy pack --part-size N`, internal/partupload)
// makes the single pass and PUTs its own archive, cut into equal parts, to the presigned UploadPart URLs the Worker
// signed. The agent starts it, hands it the URLs on stdin (never on argv: they are credentials), and answers what the
// engine reports, parsed: not a byte of the archive passes through Node (nor, as before, through the Worker).
//
//   snapflow-lazy pack --part-size N ──parts (PUT, ≤ concurrency at once, SHA-256 each)──▶ store
//          │ └──manifest──▶ manifestOut
//          └──result JSON (fd 3): {bytes, sha256, parts: [{partNumber, etag, bytes, sha256}], peakBufferedBytes, manifest…}
//
// It runs when the engine's stream mode would (engine-pass.ts engineRequest: zstd, a selection it reads alike, and for
// a delta a base kept here) and the binary knows --part-size; otherwise the caller cuts the agent's own pass into
// parts as before (presigned-multipart.ts). A delta (the 10 MB incremental) is made so too: the engine reads its kept
// base, walks, and PUTs only what changed, where the Worker used to relay it (tar-zst-delta took the multipart path).
// The store checks each part against its reported SHA-256 at completion, so an engine that lied about a part (the
// `lie` fault) is refused there, as the agent's own cutter is.
import type { Readable } from "node:stream";
import { z } from "zod";
import { AgentError } from "../http/agent-error.ts";
import { EngineBaseUnusable, EngineDeltaResult, EngineResult, engineBinary, engineKeptFile, engineRequest, preferredEngine, removeEngineLeftovers, withDelta } from "../archive/engine-pass.ts";
import type { SinglePassOptions, SinglePassResult } from "../archive/single-pass.ts";
import type { TarFormat } from "../contract/protocol.ts";
import { keepManifest } from "../manifest/manifest-kept.ts";
import { startTool } from "../system/run-tool.ts";
import { readAll, safeJson } from "../system/engine-answer.ts";

export interface EnginePartsOptions {
  partSize: number;
  concurrency: number;
  retries: number;
  /** urls[i]: part i + 1's presigned UploadPart URL (checked by the route: the store's) */
  urls: string[];
  /** test-only fault (faults.ts): part 1 changed after it was hashed */
  lie?: boolean;
}

const SHA256 = z.string().regex(/^[0-9a-f]{64}$/);
const count = z.number().int().nonnegative();
const uploaded = {
  parts: z.array(z.object({ partNumber: z.number().int().min(1), etag: z.string(), bytes: count, sha256: SHA256 })).min(1),
  peakBufferedBytes: count,
  retries: count,
};
const EnginePartsResult = EngineResult.extend(uploaded);
const EngineDeltaPartsResult = EngineDeltaResult.extend(uploaded);
const EnginePartsFailure = z.object({
  error: z.object({ code: z.enum(["bad_request", "tool_failed", "url_expired", "store_refused", "base_unusable"]), message: z.string(), field: z.string().optional() }),
});

export interface EnginePartsAnswer {
  bytes: number;
  sha256: string;
  parts: { partNumber: number; etag: string; bytes: number; sha256: string }[];
  ms: number;
  peakBufferedBytes: number;
  manifest: SinglePassResult["manifest"];
  /** a delta's: what changed, and the entries its archive holds */
  delta?: SinglePassResult["delta"];
  archived?: SinglePassResult["archived"];
  engine: "native";
  uploadedBy: "engine";
}

/**
 * An engine from before --part-size (Go's flag package names the flag it does not know), or from before pack (its
 * usage, exit 2): either way nothing was sent, and the agent's own pass runs.
 */
const LACKS_UPLOAD = /flag provided but not defined: -part-size| exited 2: usage:/;

/**
 * The engine's pass uploading its own parts, or undefined when it cannot make it here (the caller's own pass runs,
 * nothing having been sent). Rejects with the engine's error: too few URLs (400 naming urls), an expired URL, a part
 * the store refused, a tree that changed under the pass; EngineBaseUnusable when a delta's kept base is not the bytes
 * its record vouches for (nothing sent: the caller's own pass reads the store's copy).
 */
export async function enginePartsUpload(dir: string, format: TarFormat, pass: SinglePassOptions, o: EnginePartsOptions): Promise<EnginePartsAnswer | undefined> {
  const request = (pass.engine ?? preferredEngine()) === "native" ? engineRequest(format, pass) : undefined;
  const bin = request ? await engineBinary() : null;
  if (!request || !bin) return undefined;
  const started = performance.now();
  const argv = [bin, "pack", "--root", dir, "--manifest", pass.manifestOut, "--result-fd", "3", "--part-size", String(o.partSize), "--concurrency", String(o.concurrency), "--retries", String(o.retries)];
  const tool = startTool(argv, { stdin: "pipe", stdout: "ignore", fd3: "pipe" });
  tool.child.stdin!.on("error", () => {}); // it died early: its exit says why
  tool.child.stdin!.end(JSON.stringify({ ...request, urls: o.urls, ...(o.lie ? { lie: true } : {}) }));
  const [exited, said] = await Promise.allSettled([tool.done, readAll(tool.child.stdio[3] as Readable)]);
  const text = said.status === "fulfilled" ? said.value.trim() : "";
  try {
    const failure = text ? EnginePartsFailure.safeParse(safeJson(text)) : undefined;
    if (failure?.success && failure.data.error.code === "base_unusable") throw new EngineBaseUnusable(failure.data.error.message);
    if (failure?.success) throw new AgentError(failure.data.error.code as Exclude<typeof failure.data.error.code, "base_unusable">, failure.data.error.message, failure.data.error.field);
    if (exited.status === "rejected") {
      if (!text && LACKS_UPLOAD.test((exited.reason as Error).message)) return undefined;
      throw exited.reason;
    }
    const answer = safeJson(text);
    const parsed = EnginePartsResult.safeParse(answer);
    const delta = request.delta ? EngineDeltaPartsResult.safeParse(answer) : undefined;
    if (!parsed.success || delta?.success === false) throw new AgentError("tool_failed", `snapflow-lazy pack answered what is not an upload's result: ${text.slice(0, 200)}`);
    const r = parsed.data;
    const made = { manifest: { totals: r.totals, entries: r.entries, jsonBytes: r.jsonBytes, walkMs: r.walkMs, sha256: r.jsonSha256 } as SinglePassResult["manifest"] };
    const result = delta ? withDelta(made, delta.data!, pass.baseFrom?.()) : made;
    // The tree's whole manifest is kept for the next delta: beside a layer the engine wrote it there itself.
    if (pass.keep) await keepManifest(pass.keep.dir, pass.keep.id, result.manifest.treeSha256 ? { moved: engineKeptFile(pass.keep) } : { from: pass.manifestOut });
    return { bytes: r.bytes, sha256: r.sha256, parts: r.parts, ms: Math.round(performance.now() - started), peakBufferedBytes: r.peakBufferedBytes, ...result, engine: "native", uploadedBy: "engine" };
  } catch (e) {
    await removeEngineLeftovers(tool.child.pid!, pass.manifestOut, request);
    throw e;
  }
}

