// A lazy restore from a file-level index (issue 24): snapflow-lazy files-mount serves the index's tree read-only at
// the mountpoint over FUSE, answering lookups and listings from the index at once and fetching each file's chunks
// (Range GETs of the packs, each chunk checked against its SHA-256) when first read, the rest prefetched. The helper
// process is kept and registered as the mount's `stop` (mounts.ts): GET/DELETE /v1/mounts and a sandbox teardown list
// and undo it, and unmounting stops it (it also exits by itself when unmounted from outside). A mount that fails
// half-way is undone before the error is answered: nothing stays mounted and no helper runs.
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { constants } from "node:fs";
import { access, mkdir, realpath } from "node:fs/promises";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { z } from "zod";
import { AgentError } from "../http/agent-error.ts";
import type { AgentErrorCode } from "../contract/agent-error-codes.ts";
import type { FilesMountResult } from "../contract/protocol.ts";
import { lazyTool } from "../system/lazy-tool.ts";
import { storeIdleMs } from "../transfer/stall-deadline.ts";
import { writeUrlFile } from "../transfer/url-file.ts";
import { stopHelper } from "./lazy-mount.ts";
import { prepareTarget, readMountinfo, type MountRegistry } from "./mounts.ts";

/** How long the helper may take to answer (the npm workspace's index, 31.7k entries, loads in ~0.1 s). */
const READY_TIMEOUT_MS = 30_000;
const STDERR_TAIL = 4000;

/** The helper's one stdout line: ready, or a refused index's error (its code kept). */
const ReadyLine = z.object({ ready: z.literal(true), readyMs: z.number(), entries: z.number().int(), chunks: z.number().int(), local: z.number().int() }).loose();
const ErrorLine = z.object({ error: z.object({ code: z.string(), message: z.string(), field: z.string().optional() }) });

const REFUSED: Record<string, AgentErrorCode> = { path_outside_root: "path_outside_root", bad_request: "bad_request", verify_failed: "verify_failed" };

export interface FilesMountRequest {
  /** host and sandbox paths of the index file; its SHA-256; the store's URL of it, when the helper fetches it there */
  index: string;
  indexPath: string;
  sha256: string;
  indexUrl?: string;
  /** a layered index's objects beneath it, whole index first: the helper fetches them beside the index (needs indexUrl) */
  chain?: { url: string; sha256: string }[];
  /** host and sandbox paths of the mountpoint, and of this mount's work directory (URL and status files) */
  dir: string;
  path: string;
  work: string;
  workPath: string;
  cache: string;
  urls: Record<string, string>;
  prefetch: number;
}

/** A new work directory's name under the sandbox's lazy directory. */
export const filesWorkName = () => `files-${randomUUID()}`;

export async function mountFiles(registry: MountRegistry, sandboxId: string, r: FilesMountRequest): Promise<FilesMountResult> {
  const started = performance.now();
  const bin = await lazyTool();
  if (!(await access("/dev/fuse", constants.R_OK | constants.W_OK).then(() => true, () => false))) throw new AgentError("unavailable", "a lazy mount needs /dev/fuse, which this sandbox does not have");
  const dir = await prepareTarget(r.dir, "mountpoint");
  await mkdir(r.work, { recursive: true });
  await mkdir(r.cache, { recursive: true });
  if (r.indexUrl) await mkdir(dirname(r.index), { recursive: true }); // where the helper keeps the index it fetches
  const urls = join(r.work, "urls.json"), status = join(r.work, "status.json");
  // Presigned URLs are credentials: in files only this user reads, never on the command line.
  const indexUrls = join(r.work, "index-url.json");
  await Promise.all([writeUrlFile(urls, r.urls), r.indexUrl ? writeUrlFile(indexUrls, { index: r.indexUrl, ...Object.fromEntries((r.chain ?? []).map((o, i) => [`chain.${i}`, o.url])) }) : undefined]);
  // A chunk's frame is at most a few MiB and a prefetch GET a few frames: the bound the agent gives a silent store.
  const child = spawn(bin, ["files-mount", "--index", r.index, "--index-sha256", r.sha256, ...(r.indexUrl ? ["--index-url", indexUrls] : []), ...(r.chain?.length ? ["--chain-sha256", r.chain.map((o) => o.sha256).join(",")] : []), "--urls", urls, "--cache", r.cache, "--mountpoint", dir,
    "--status", status, "--prefetch", String(r.prefetch), "--fetch-timeout", `${storeIdleMs()}ms`], { stdio: ["ignore", "pipe", "pipe"] });
  let stderr = "";
  child.stderr!.on("data", (d: Buffer) => (stderr = (stderr + d.toString()).slice(-STDERR_TAIL)));
  const spawnFailed = new Promise<never>((_, reject) => child.once("error", (e) => reject(new AgentError("unavailable", `snapflow-lazy could not start: ${e.message}`))));
  const stop = () => stopHelper(child, dir);
  let registered = false;
  try {
    const lines = createInterface({ input: child.stdout! });
    const firstLine = new Promise<string>((resolve, reject) => {
      lines.once("line", resolve);
      child.once("close", (code, signal) => reject(new AgentError("tool_failed", `snapflow-lazy files-mount exited ${code ?? signal} before it was ready: ${stderr.trim()}`)));
    });
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new AgentError("tool_failed", `snapflow-lazy files-mount was not ready after ${READY_TIMEOUT_MS} ms: ${stderr.trim()}`)), READY_TIMEOUT_MS)));
    const text = await Promise.race([firstLine, spawnFailed, timeout]).finally(() => clearTimeout(timer));
    const refused = ErrorLine.safeParse(safeJson(text));
    if (refused.success) {
      const e = refused.data.error;
      throw new AgentError(REFUSED[e.code] ?? "tool_failed", e.message, e.field?.startsWith("index") ? "index" : e.field);
    }
    const line = ReadyLine.safeParse(safeJson(text));
    if (!line.success) throw new AgentError("tool_failed", `snapflow-lazy files-mount answered ${text.slice(0, 200)}: ${stderr.trim()}`);
    const ready = line.data;
    const fuseMs = Math.round(performance.now() - started);
    const info = (await readMountinfo()).findLast((m) => m.mountPoint === dir);
    const entry = { path: r.path, kind: "lazy" as const, source: r.indexPath, how: "fuse" as const, tool: "snapflow-lazy", fstype: info?.fstype ?? "fuse.snapflow-files", since: new Date().toISOString() };
    registry.add(sandboxId, { entry, hostPath: dir, hostSources: [await realpath(r.cache)], fuse: true, stop });
    registered = true;
    return {
      ms: Math.round(performance.now() - started), fuseMs, readyMs: ready.readyMs, entries: ready.entries, chunks: ready.chunks, local: ready.local,
      work: r.workPath, status: `${r.workPath}/status.json`, mounted: entry,
    };
  } catch (e) {
    await stop().catch(() => {});
    if (registered) registry.forget(sandboxId, dir);
    throw e;
  }
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
