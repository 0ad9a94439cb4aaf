// A lazy mount: the workspace image served by snapflow-lazy as a FUSE file (MOUNTPOINT/image) whose chunks are
// fetched over presigned GETs on first read, verified against their SHA-256 before a byte is served, cached in the
// sandbox's content-addressed chunk cache and prefetched in the background; then the image mounted read-only from
// that file — by the kernel's squashfs (through a loop device) when this sandbox may mount, else squashfuse — so the
// tree answers before the image is downloaded.
//
// Both mounts are registered (mounts.ts), the image mount depending on the FUSE file, so GET/DELETE /v1/mounts and a
// sandbox teardown list and undo them in order; unmounting the FUSE file stops its helper process (SIGTERM: it
// unmounts and exits; it also exits by itself when unmounted from outside). A mount that fails half-way is undone
// before the error is answered: nothing is left mounted and no helper runs.
import { spawn, type ChildProcess } from "node:child_process";
import { access, mkdir, readFile, realpath, rm, writeFile } from "node:fs/promises";
import { constants } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { AgentError } from "../http/agent-error.ts";
import { lazyTool } from "../system/lazy-tool.ts";
import { mountedAt, mountImage, prepareTarget, readMountinfo, type MountRegistry } from "./mounts.ts";
import { hasCapSysAdmin } from "../system/probe.ts";
import type { LazyStatus, MountEntry, SquashfsFormat } from "../contract/protocol.ts";
import { runQuiet } from "../images/images.ts";
import { storeIdleMs } from "../transfer/stall-deadline.ts";
import { writeUrlFile } from "../transfer/url-file.ts";

/** The files of one lazy mount inside its work directory. */
export const lazyFiles = (work: string) => ({ fuse: join(work, "fuse"), image: join(work, "fuse", "image"), urls: join(work, "urls.json"), status: join(work, "status.json") });

/** How long the helper may take to answer (an index of 10k chunks loads in well under a second). */
const READY_TIMEOUT_MS = 30_000;
/** How long a stopping helper gets to unmount and exit before it is killed. */
const STOP_TIMEOUT_MS = 5_000;
const STDERR_TAIL = 4000;

export interface LazyMountRequest {
  /** host and sandbox paths: index file, work directory, chunk cache, mount target */
  index: string;
  indexPath: string;
  work: string;
  workPath: string;
  cache: string;
  /** where the image is mounted; none: only the FUSE file (remountLazyImage mounts the image later) */
  dir?: string;
  path?: string;
  urls: Record<string, string>;
  /** `urls` is a first part; addLazyUrls brings the rest */
  moreUrls?: boolean;
  format: SquashfsFormat;
  prefetch: number;
}

/** The marker snapflow-lazy reads as "more URLs are coming" (native/lazy/internal/urlfile). */
const urlsToCome = (urlFile: string) => `${urlFile}.more`;

/**
 * More URLs for a lazy mount started with `moreUrls`: merged into its URL file (replaced whole, so the helper never
 * reads half of it); after the `last`, the marker goes and a chunk still without a URL fails as missing.
 */
export async function addLazyUrls(work: string, urls: Record<string, string>, last: boolean): Promise<{ urls: number }> {
  const file = lazyFiles(work).urls;
  const current = JSON.parse(await readFile(file, "utf8").catch(() => {
    throw new AgentError("not_found", "work: no lazy mount's URL file there", "work");
  })) as Record<string, string>;
  const merged = Object.assign(current, urls);
  await writeUrlFile(file, merged);
  if (last) await rm(urlsToCome(file), { force: true });
  return { urls: Object.keys(merged).length };
}

export interface LazyMountResult {
  ms: number;
  /** the helper's own time from exec to a mount that answers (its status readyMs) */
  readyMs: number;
  /** exec → ready line, as the agent saw it */
  fuseMs: number;
  /** the image mount over the FUSE file (0 and no `how` when none was asked for) */
  mountMs: number;
  how?: "mount-kernel" | "mount-fuse";
  mounted: MountEntry[];
  /** sandbox path of the status file */
  status: string;
  chunks: number;
  /** chunks already in the sandbox's cache (a fork's restore reuses its parent's) */
  local: number;
}

function exited(child: ChildProcess): Promise<void> {
  return child.exitCode !== null || child.signalCode !== null ? Promise.resolve() : new Promise((r) => child.once("close", () => r()));
}

/** SIGTERM (the helper unmounts and exits), SIGKILL after STOP_TIMEOUT_MS, then a lazy unmount of whatever is left. */
export async function stopHelper(child: ChildProcess, fuseDir: string): Promise<void> {
  if (child.exitCode === null && child.signalCode === null) {
    child.kill("SIGTERM");
    const killed = setTimeout(() => child.kill("SIGKILL"), STOP_TIMEOUT_MS);
    await exited(child);
    clearTimeout(killed);
  }
  // A helper that died (killed, crashed) leaves a dead FUSE mount ("transport endpoint is not connected").
  if ((await readMountinfo()).some((m) => m.mountPoint === fuseDir)) await runQuiet(["fusermount3", "-u", "-z", fuseDir]);
}

/** The image mount: the kernel's when this sandbox may mount and has squashfs, else FUSE (squashfuse). */
async function imageMountHow(): Promise<"mount-kernel" | "mount-fuse"> {
  const [status, filesystems] = await Promise.all([readFile("/proc/self/status", "utf8").catch(() => ""), readFile("/proc/filesystems", "utf8").catch(() => "")]);
  const squashfs = filesystems.split("\n").some((l) => l.split("\t").pop()?.trim() === "squashfs");
  return hasCapSysAdmin(status) && squashfs ? "mount-kernel" : "mount-fuse";
}

/** The status file as the helper last wrote it, or null before it wrote one. */
export async function readLazyStatus(file: string): Promise<LazyStatus | null> {
  try {
    return JSON.parse(await readFile(file, "utf8")) as LazyStatus;
  } catch {
    return null;
  }
}

/**
 * The status once it lists the failed chunks: the helper rewrites it at most every 200 ms, so a failure that just
 * happened may not be in the file yet.
 */
async function statusWithFailures(file: string, withinMs = 1000): Promise<LazyStatus | null> {
  const started = performance.now();
  let status = await readLazyStatus(file);
  while (!status?.failed.length && performance.now() - started < withinMs) {
    await new Promise((r) => setTimeout(r, 50));
    status = await readLazyStatus(file);
  }
  return status;
}

/** "chunk <sha> (#i): reason; …" for messages that must name the chunks a mount could not have. */
export function describeFailed(status: LazyStatus | null): string {
  const failed = status?.failed ?? [];
  return failed.slice(0, 5).map((f) => `${f.reason.includes(f.sha256) ? f.reason : `chunk ${f.sha256}: ${f.reason}`} (#${f.index} in the index)`).join("; ") + (failed.length > 5 ? `; and ${failed.length - 5} more` : "");
}

export async function mountLazy(registry: MountRegistry, sandboxId: string, r: LazyMountRequest): Promise<LazyMountResult> {
  const started = performance.now();
  const bin = await lazyTool();
  if (!(await access("/dev/fuse", constants.R_OK | constants.W_OK).then(() => true, () => false))) throw new AgentError("unavailable", "a lazy mount needs /dev/fuse, which this sandbox does not have");
  const files = lazyFiles(r.work);
  await mkdir(r.work, { recursive: true });
  await mkdir(r.cache, { recursive: true });
  const fuseDir = await prepareTarget(files.fuse, "work");
  await writeUrlFile(files.urls, r.urls);
  // While the marker stands, a chunk without a URL waits for the next POST /v1/lazy/urls (urlfile.go Await).
  if (r.moreUrls) await writeFile(urlsToCome(files.urls), "", { mode: 0o600 });
  else await rm(urlsToCome(files.urls), { force: true });

  // A chunk is at most a few MiB: its whole GET gets the bound the agent gives a silent store (stall-deadline.ts),
  // after which the helper abandons the attempt and tries again.
  const child = spawn(bin, ["mount", "--index", r.index, "--urls", files.urls, "--cache", r.cache, "--mountpoint", fuseDir, "--status", files.status, "--prefetch", String(r.prefetch), "--fetch-timeout", `${storeIdleMs()}ms`], { stdio: ["ignore", "pipe", "pipe"] });
  let stderr = "";
  child.stderr!.on("data", (d: Buffer) => (stderr = (stderr + d.toString()).slice(-STDERR_TAIL)));
  const spawnFailed = new Promise<never>((_, reject) => child.once("error", (e) => reject(new AgentError("unavailable", `snapflow-lazy could not start: ${e.message}`))));
  const stop = () => stopHelper(child, fuseDir);
  let registered = false;
  try {
    const lines = createInterface({ input: child.stdout! });
    const readyLine = new Promise<string>((resolve, reject) => {
      lines.once("line", resolve);
      child.once("close", (code, signal) => reject(new AgentError("tool_failed", `snapflow-lazy mount exited ${code ?? signal} before it was ready: ${stderr.trim()}`)));
    });
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new AgentError("tool_failed", `snapflow-lazy mount was not ready after ${READY_TIMEOUT_MS} ms: ${stderr.trim()}`)), READY_TIMEOUT_MS)));
    const ready = JSON.parse(await Promise.race([readyLine, spawnFailed, timeout]).finally(() => clearTimeout(timer))) as { ready: boolean; readyMs: number; chunks: number; local: number };
    const fuseMs = Math.round(performance.now() - started);
    const info = (await readMountinfo()).findLast((m) => m.mountPoint === fuseDir);
    const lazyEntry: MountEntry = { path: `${r.workPath}/fuse`, kind: "lazy", source: r.indexPath, how: "fuse", tool: "snapflow-lazy", fstype: info?.fstype ?? "fuse.snapflow-lazy", since: new Date().toISOString() };
    registry.add(sandboxId, { entry: lazyEntry, hostPath: fuseDir, hostSources: [await realpath(r.cache)], fuse: true, stop });
    registered = true;

    const image = r.dir !== undefined && r.path !== undefined ? await mountImageFromHelper(registry, sandboxId, { ...r, dir: r.dir, path: r.path }) : undefined;
    return {
      ms: Math.round(performance.now() - started), readyMs: ready.readyMs, fuseMs, mountMs: image?.ms ?? 0, ...(image ? { how: image.how } : {}),
      mounted: image ? [lazyEntry, image.mounted] : [lazyEntry], status: `${r.workPath}/status.json`, chunks: ready.chunks, local: ready.local,
    };
  } catch (e) {
    await stop().catch(() => {});
    if (registered) registry.forget(sandboxId, fuseDir);
    throw e;
  }
}

export type LazyImageMountRequest = Pick<LazyMountRequest, "work" | "workPath" | "format"> & { dir: string; path: string };

/** The image mounted read-only at `dir` from the helper's FUSE file (which must be serving). */
async function mountImageFromHelper(registry: MountRegistry, sandboxId: string, r: LazyImageMountRequest): Promise<{ ms: number; how: "mount-kernel" | "mount-fuse"; mounted: MountEntry }> {
  const started = performance.now();
  const files = lazyFiles(r.work);
  const how = await imageMountHow();
  try {
    const mounted = await mountImage(registry, sandboxId, { file: files.image, source: `${r.workPath}/fuse/image`, dir: r.dir, path: r.path, format: r.format, how });
    return { ms: Math.round(performance.now() - started), how, mounted };
  } catch (e) {
    // The image's first reads (the superblock, the tables at its end) go through the helper: a chunk it could not
    // have is the reason the mount failed, and what the caller must hear about.
    const failed = describeFailed(await statusWithFailures(files.status));
    // verify_failed (422): the chunk was already retried; the snapshot, not the moment, is at fault.
    throw failed ? new AgentError("verify_failed", `the image could not be mounted because its chunks could not be had: ${failed}`) : e;
  }
}

/**
 * The image mounted at `dir` from a lazy mount whose helper still serves (started without a path): a restore's swap
 * does it at its target (SwapMount). The helper, its URLs, its cache and its prefetch go on; nothing is signed or
 * fetched again. 404 when no helper serves at `work` (it died with an agent): the caller then mounts from scratch.
 */
export async function remountLazyImage(registry: MountRegistry, sandboxId: string, r: LazyImageMountRequest): Promise<{ ms: number; how: "mount-kernel" | "mount-fuse"; mounted: MountEntry }> {
  // Compared canonically, as the registry holds it (prepareTarget): a sandbox root reached through a symlink would
  // otherwise never match, and every swap would mount from scratch.
  const serving = await mountedAt(registry, sandboxId, lazyFiles(r.work).fuse, (e) => e.kind === "lazy");
  if (!serving) throw new AgentError("not_found", `work: no lazy mount's helper serves at ${r.workPath}`, "work");
  // Asked again (a retried swap): the image from this helper already at `dir` is the answer, not a second mount.
  const there = await mountedAt(registry, sandboxId, r.dir, (e) => e.kind === "image" && e.source === `${r.workPath}/fuse/image`);
  if (there) return { ms: 0, how: there.how as "mount-kernel" | "mount-fuse", mounted: there };
  return mountImageFromHelper(registry, sandboxId, r);
}

export interface LazyWaitResult extends LazyStatus {
  waitedMs: number;
  /** the helper is still serving (false: it stopped, so nothing will change any more) */
  running: boolean;
}

const settled = (s: LazyStatus | null) => !!s && (s.state === "complete" || s.state === "stopped" || s.prefetch === "done" || s.prefetch === "off");

/**
 * Waits until the image is complete (every chunk local and verified), the prefetcher has ended without completing
 * it (a chunk that cannot be had: `failed` names it), or `timeoutMs` passed; answers the status then.
 */
export async function waitLazy(statusFile: string, timeoutMs: number): Promise<LazyWaitResult> {
  const started = performance.now();
  let status = await readLazyStatus(statusFile);
  if (!status) throw new AgentError("not_found", "work: no lazy mount's status there", "work");
  while (!settled(status) && performance.now() - started < timeoutMs) {
    await new Promise((r) => setTimeout(r, 50));
    status = (await readLazyStatus(statusFile)) ?? status;
  }
  return { ...status!, waitedMs: Math.round(performance.now() - started), running: status!.state !== "stopped" };
}
