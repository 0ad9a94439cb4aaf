// The file-level backup (issue 24) with no relay: the native engine (`snapflow-lazy files-pack`,
// native/lazy/internal/filecas) walks the tree, takes each file unchanged since the base index from it unread, packs
// the new chunks and PUTs the pack in parts to the presigned UploadPart URLs the Worker signed. The agent starts it,
// hands it the URLs (and the base's GET URL) on stdin, never on argv (they are credentials), and answers what the
// engine reports, parsed: not a byte of the tree or the pack passes through Node.
//
//   snapflow-lazy files-pack ──parts (PUT, ≤ concurrency at once, SHA-256 each)──▶ store
//          │ ├──manifest──▶ manifestOut     (both named only once every part is stored; no manifestOut: none)
//          │ └──index─────▶ indexOut
//          └──result JSON (fd 3): FilesPackResult, or {error: {code, message, field}}
import { rm } from "node:fs/promises";
import type { Readable } from "node:stream";
import { z } from "zod";
import { AgentError } from "../http/agent-error.ts";
import { FilesPackResult } from "../contract/protocol.ts";
import type { EngineSelection } from "../archive/selection.ts";
import { readAll, safeJson } from "../system/engine-answer.ts";
import { lazyTool } from "../system/lazy-tool.ts";
import { startTool } from "../system/run-tool.ts";

export interface FilesPackRun {
  /** host paths */
  dir: string;
  /** absent: no manifest file (the result still gives its size and SHA-256) */
  manifestOut?: string;
  indexOut: string;
  name: string;
  avgChunk?: number;
  level?: number;
  selection?: EngineSelection;
  /** file: a host path; url: checked to be the store's */
  base?: { file?: string; url?: string; sha256: string; stat?: string; layers?: string[]; chain?: { file?: string; url?: string; sha256: string }[] };
  /** write the index as a layer over the base's (native/lazy/internal/filecas/layer.go); statsOut: the tree's own stat keys then */
  layer?: boolean;
  statsOut?: string;
  urls: string[];
  partSize: number;
  concurrency: number;
  retries: number;
  /** the request ended before the engine did: stop it (it leaves neither the manifest nor the index) */
  signal?: AbortSignal;
  /** test-only (faults.ts `lie`): one file's SHA-256 in the index and the manifest is not its content's */
  lie?: boolean;
}

const EngineFailure = z.object({
  error: z.object({ code: z.enum(["bad_request", "path_outside_root", "tool_failed", "url_expired", "store_refused", "base_unusable"]), message: z.string(), field: z.string().optional() }),
});

/**
 * Runs files-pack and answers its result. Rejects with the engine's error as the agent's: a base it cannot use is
 * bad_request naming `base` (nothing was PUT; the Worker backs up without it), too few URLs bad_request naming
 * `urls`, an expired URL url_expired, a part the store refused store_refused, a file that changed while read
 * tool_failed naming it.
 */
export async function filesPack(o: FilesPackRun): Promise<FilesPackResult> {
  const argv = [await lazyTool(), "files-pack", "--root", o.dir, ...(o.manifestOut ? ["--manifest", o.manifestOut] : []), "--index", o.indexOut, "--result-fd", "3",
    "--part-size", String(o.partSize), "--concurrency", String(o.concurrency), "--retries", String(o.retries)];
  const request = {
    name: o.name, ...(o.avgChunk ? { avgChunk: o.avgChunk } : {}), ...(o.level !== undefined ? { level: o.level } : {}),
    ...(o.selection ? { selection: o.selection } : {}), ...(o.base ? { base: o.base } : {}), urls: o.urls,
    ...(o.layer ? { layer: true } : {}), ...(o.statsOut ? { statsOut: o.statsOut } : {}), ...(o.lie ? { lie: true } : {}),
  };
  const tool = startTool(argv, { stdin: "pipe", stdout: "ignore", fd3: "pipe" });
  const stop = () => tool.child.exitCode === null && tool.child.kill("SIGTERM");
  o.signal?.addEventListener("abort", stop, { once: true });
  tool.child.stdin!.on("error", () => {}); // it died early: its exit says why
  tool.child.stdin!.end(JSON.stringify(request));
  const [exited, said] = await Promise.allSettled([tool.done, readAll(tool.child.stdio[3] as Readable)]);
  o.signal?.removeEventListener("abort", stop);
  const text = said.status === "fulfilled" ? said.value.trim() : "";
  try {
    const failure = text ? EngineFailure.safeParse(safeJson(text)) : undefined;
    if (failure?.success) {
      const { code, message, field } = failure.data.error;
      if (code === "base_unusable") throw new AgentError("bad_request", `base: ${message}; back up without a base`, "base");
      throw new AgentError(code, message, field);
    }
    if (exited.status === "rejected") throw exited.reason;
    const parsed = FilesPackResult.safeParse(safeJson(text));
    if (!parsed.success) throw new AgentError("tool_failed", `snapflow-lazy files-pack answered what is not its result (${parsed.error.issues[0]?.path.join(".")}: ${parsed.error.issues[0]?.message}): ${text.slice(0, 200)}`);
    return parsed.data;
  } catch (e) {
    // Killed outright (SIGKILL), the engine leaves its files beside their names (native/lazy pack.TempManifest).
    await Promise.all([o.manifestOut, o.indexOut].filter((f) => f !== undefined).map((f) => rm(`${f}.tmp-${tool.child.pid}`, { force: true })));
    throw e;
  }
}
