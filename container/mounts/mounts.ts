// Mounts the agent makes for a sandbox: an image mounted read-only (the kernel's squashfs/erofs through a loop
// device, or FUSE: squashfuse_ll, erofsfuse) and a writable overlay over such a base (the kernel's overlayfs, or
// fuse-overlayfs), plus the per-sandbox registry that lists them and takes them down in the right order.
//
// The registry is in memory and /proc/self/mountinfo is the truth: listing drops what has vanished, and dropping
// a sandbox also takes down anything still mounted below its root, so its directory is never deleted through a
// live mount. A mount needs an empty or missing target directory. An overlay gets a fresh upper and work
// directory under /snapflow/overlays/<hash of its path>/; the upper is a plain directory that the tar endpoints
// can archive (the changes made on top of the base).
import { constants } from "node:fs";
import { access, lstat, mkdir, readdir, readFile, realpath, rm } from "node:fs/promises";
import { AgentError } from "../http/agent-error.ts";
import { findOnPath } from "../system/find-on-path.ts";
import { dirname, relative } from "node:path";
import { checkOverlayPath, FUSE_IMAGE_TOOLS, MOUNT_OPTIONS_MAX, mountFuseArgv, mountKernelArgv, overlayFuseArgv, overlayKernelArgv, overlayStackArgv, unmountArgv } from "../images/image-argv.ts";
import { runQuiet } from "../images/images.ts";
import { hasCapSysAdmin } from "../system/probe.ts";
import { startTool } from "../system/run-tool.ts";
import type { ImageFormat, MountEntry } from "../contract/protocol.ts";

/** A registry entry: the public MountEntry plus the host paths it stands on. */
export interface MountRecord {
  entry: MountEntry;
  /** canonical host path of the mount point, as /proc/self/mountinfo shows it */
  hostPath: string;
  /** host paths the mount reads from or writes to (image file; lower, upper, work): it must go before them */
  hostSources: string[];
  fuse: boolean;
  /**
   * How to take it down when unmounting is more than umount: a lazy mount's helper process is told to stop (it
   * unmounts itself and exits), so no process outlives its mount.
   */
  stop?: () => Promise<void>;
}

export class MountRegistry {
  private bySandbox = new Map<string, MountRecord[]>();

  records(sandboxId: string): MountRecord[] {
    return [...(this.bySandbox.get(sandboxId) ?? [])];
  }
  add(sandboxId: string, record: MountRecord): void {
    this.bySandbox.set(sandboxId, [...this.records(sandboxId).filter((r) => r.hostPath !== record.hostPath), record]);
  }
  forget(sandboxId: string, hostPath: string): void {
    const left = this.records(sandboxId).filter((r) => r.hostPath !== hostPath);
    if (left.length) this.bySandbox.set(sandboxId, left);
    else this.bySandbox.delete(sandboxId);
  }
}

// ---- /proc/self/mountinfo ----

export interface MountInfo {
  mountPoint: string;
  fstype: string;
  source: string;
  /** the per-mount options (ro, nosuid, nodev, …) */
  options: string[];
  /** the filesystem's own options (an overlay's lowerdir=…, upperdir=…) */
  superOptions: string[];
}

/** mountinfo escapes space, tab, newline and backslash in paths as \ooo. */
function unescapeMountPath(s: string): string {
  return s.replace(/\\([0-7]{3})/g, (_, oct: string) => String.fromCharCode(parseInt(oct, 8)));
}

/** Parses mountinfo lines: "id parent maj:min root mountpoint options [optional...] - fstype source superopts". */
export function parseMountinfo(text: string): MountInfo[] {
  const out: MountInfo[] = [];
  for (const line of text.split("\n")) {
    const sep = line.indexOf(" - ");
    if (sep < 0) continue;
    const left = line.slice(0, sep).split(" ");
    const right = line.slice(sep + 3).split(" ");
    if (left.length < 5 || right.length < 2) continue;
    out.push({ mountPoint: unescapeMountPath(left[4]!), fstype: right[0]!, source: unescapeMountPath(right[1]!), options: (left[5] ?? "").split(",").filter(Boolean), superOptions: (right[2] ?? "").split(",").filter(Boolean).map(unescapeMountPath) });
  }
  return out;
}

export async function readMountinfo(): Promise<MountInfo[]> {
  return parseMountinfo(await readFile("/proc/self/mountinfo", "utf8"));
}

export const isFuseType = (fstype: string) => fstype === "fuse" || fstype.startsWith("fuse.") || fstype === "fuseblk";

// ---- what this sandbox can mount ----

function unavailable(message: string): AgentError {
  return new AgentError("unavailable", `how: ${message}`, "how");
}

/** Kernel mounts need CAP_SYS_ADMIN and the filesystem in /proc/filesystems (a container cannot load modules). */
async function requireKernelFs(fstype: string): Promise<void> {
  const [status, filesystems] = await Promise.all([readFile("/proc/self/status", "utf8").catch(() => ""), readFile("/proc/filesystems", "utf8").catch(() => "")]);
  if (!hasCapSysAdmin(status)) throw unavailable(`a kernel ${fstype} mount needs CAP_SYS_ADMIN, which this sandbox does not have`);
  if (!filesystems.split("\n").some((l) => l.split("\t").pop()?.trim() === fstype)) throw unavailable(`the kernel here has no ${fstype} (not in /proc/filesystems)`);
}

/** FUSE needs /dev/fuse, fusermount3 (to unmount) and the first of `tools` that is installed. */
async function requireFuse(tools: string[], what: string): Promise<string> {
  if (!(await access("/dev/fuse", constants.R_OK | constants.W_OK).then(() => true, () => false))) throw unavailable(`${what} needs /dev/fuse, which this sandbox does not have`);
  if (!(await findOnPath("fusermount3"))) throw unavailable(`${what} needs fusermount3 (package fuse3), which is not installed`);
  for (const tool of tools) if (await findOnPath(tool)) return tool;
  throw unavailable(`${what} needs ${tools.join(" or ")}, which ${tools.length > 1 ? "are" : "is"} not installed`);
}

// ---- mounting ----

/** A mount target must be an empty directory or nothing (it is then created). Returns its canonical path. */
export async function prepareTarget(dir: string, field: string): Promise<string> {
  const st = await lstat(dir).catch(() => null);
  if (st && !st.isDirectory()) throw new AgentError("bad_request", `${field}: a mount needs an empty or missing directory, and this is not a directory`, field);
  if (st) {
    const entries = await readdir(dir);
    if (entries.length) throw new AgentError("bad_request", `${field}: a mount needs an empty or missing directory, and this one has ${entries.length} entries`, field);
  } else await mkdir(dir, { recursive: true });
  const canonical = await realpath(dir);
  if ((await readMountinfo()).some((m) => m.mountPoint === canonical)) throw new AgentError("bad_request", `${field}: something is already mounted there`, field);
  return canonical;
}

async function runMount(argv: string[], hostPath: string, cwd?: string): Promise<MountInfo> {
  await (cwd ? startTool(argv, { stdout: "ignore", cwd }).done : runQuiet(argv));
  const info = (await readMountinfo()).findLast((m) => m.mountPoint === hostPath);
  if (!info) throw new AgentError("tool_failed", `${argv.join(" ")} succeeded but nothing is mounted at ${hostPath}`);
  return info;
}

export interface ImageMountRequest {
  /** host path of the image file, and its sandbox path (for the registry) */
  file: string;
  source: string;
  /** host path of the mount point, and its sandbox path */
  dir: string;
  path: string;
  format: ImageFormat;
  how: "mount-kernel" | "mount-fuse";
}

/** Mounts an image read-only and registers it. */
export async function mountImage(registry: MountRegistry, sandboxId: string, r: ImageMountRequest): Promise<MountEntry> {
  const kind = r.format.kind;
  const tool = r.how === "mount-kernel" ? (await requireKernelFs(kind), "mount") : await requireFuse(FUSE_IMAGE_TOOLS[kind], `a FUSE ${kind} mount`);
  const hostPath = await prepareTarget(r.dir, "path");
  const argv = r.how === "mount-kernel" ? mountKernelArgv(r.file, hostPath, kind) : mountFuseArgv(tool, r.file, hostPath);
  const info = await runMount(argv, hostPath);
  const entry: MountEntry = { path: r.path, kind: "image", source: r.source, how: r.how, tool, fstype: info.fstype, since: new Date().toISOString() };
  registry.add(sandboxId, { entry, hostPath, hostSources: [await realpath(r.file)], fuse: r.how === "mount-fuse" });
  return entry;
}

export interface OverlayMountRequest {
  /** host and sandbox paths of the lower (read-only) directory, the mount point, and the upper and work dirs */
  lower: string;
  lowerPath: string;
  dir: string;
  path: string;
  upper: string;
  upperPath: string;
  work: string;
  workPath: string;
  how: "kernel" | "fuse";
  /** keep what the upper directory holds (a restored overlay delta); otherwise it starts empty */
  keepUpper?: boolean;
  /** refuse (404, `lower`) a lower that is not a mount point */
  lowerMounted?: boolean;
}

/** Mounts a writable overlay over `lower` (a fresh upper unless keepUpper, always a fresh work dir), and registers it. */
export async function mountOverlay(registry: MountRegistry, sandboxId: string, r: OverlayMountRequest): Promise<MountEntry> {
  // The same overlay over a kept upper already at `dir` (a retried step made it) is answered as made, not stacked
  // again: the caller need not ask first what is mounted there.
  if (r.keepUpper) {
    const same = await sameOverlayAt(registry, sandboxId, r);
    if (same) return same;
  }
  if (!(await lstat(r.lower).catch(() => null))?.isDirectory()) throw new AgentError("not_found", "lower: no directory there", "lower");
  const tool = r.how === "kernel" ? (await requireKernelFs("overlay"), "mount") : await requireFuse(["fuse-overlayfs"], "a FUSE overlay");
  const lower = checkOverlayPath(await realpath(r.lower), "lower");
  if (r.lowerMounted && !(await readMountinfo()).some((m) => m.mountPoint === lower)) throw new AgentError("not_found", "lower: nothing is mounted there any more", "lower");
  const hostPath = checkOverlayPath(await prepareTarget(r.dir, "path"), "path");
  // A fresh writable layer: whatever a previous overlay at this path left is not carried over.
  for (const d of r.keepUpper ? [r.work] : [r.upper, r.work]) {
    await rm(d, { recursive: true, force: true });
    await mkdir(d, { recursive: true });
  }
  await mkdir(r.upper, { recursive: true });
  const upper = checkOverlayPath(await realpath(r.upper), "path");
  const work = checkOverlayPath(await realpath(r.work), "path");
  const argv = r.how === "kernel" ? overlayKernelArgv(lower, upper, work, hostPath) : overlayFuseArgv(lower, upper, work, hostPath);
  const info = await runMount(argv, hostPath);
  const entry: MountEntry = {
    path: r.path, kind: "overlay", source: r.lowerPath, how: r.how, tool: r.how === "kernel" ? "mount" : tool, fstype: info.fstype,
    since: new Date().toISOString(), upper: r.upperPath, work: r.workPath,
  };
  registry.add(sandboxId, { entry, hostPath, hostSources: [lower, upper, work], fuse: r.how === "fuse" });
  return entry;
}

export interface OverlayStackRequest {
  /** host and sandbox paths of the lowers, topmost first, and of the mount point */
  lowers: string[];
  lowerPaths: string[];
  dir: string;
  path: string;
}

/**
 * Mounts a read-only overlay of several lowers (an overlay delta chain's layers over its image) and registers it;
 * the same stack already mounted at `dir` (a retried step) is answered as made. The kernel's overlayfs only: the
 * layers' whiteouts and opaque marks are its own format.
 */
export async function mountOverlayStack(registry: MountRegistry, sandboxId: string, r: OverlayStackRequest): Promise<MountEntry> {
  const source = r.lowerPaths.join(":");
  const same = await mountedAt(registry, sandboxId, r.dir, (e) => e.kind === "overlay" && e.source === source && !e.upper);
  if (same) return same;
  await requireKernelFs("overlay");
  const lowers: string[] = [];
  for (const [i, l] of r.lowers.entries()) {
    if (!(await lstat(l).catch(() => null))?.isDirectory()) throw new AgentError("not_found", `lowers[${i}]: no directory there`, `lowers[${i}]`);
    lowers.push(checkOverlayPath(await realpath(l), `lowers[${i}]`));
  }
  const hostPath = checkOverlayPath(await prepareTarget(r.dir, "path"), "path");
  // Layers that share the top layer's directory are named relative to it (the mount runs there): the options stay
  // within the kernel's page whatever the sandbox root's length.
  const cwd = dirname(lowers[0]!);
  const named = lowers.map((l) => (dirname(l) === cwd ? relative(cwd, l) : l));
  const argv = overlayStackArgv(named, hostPath);
  if (argv[5]!.length > MOUNT_OPTIONS_MAX) throw new AgentError("bad_request", `lowers: ${lowers.length} layers make overlay options of ${argv[5]!.length} bytes, more than the kernel reads (${MOUNT_OPTIONS_MAX})`, "lowers");
  const info = await runMount(argv, hostPath, cwd);
  const entry: MountEntry = { path: r.path, kind: "overlay", source, how: "kernel", tool: "mount", fstype: info.fstype, since: new Date().toISOString() };
  registry.add(sandboxId, { entry, hostPath, hostSources: lowers, fuse: false });
  return entry;
}

const sameOverlayAt = (registry: MountRegistry, sandboxId: string, r: OverlayMountRequest) =>
  mountedAt(registry, sandboxId, r.dir, (e) => e.kind === "overlay" && e.source === r.lowerPath && e.upper === r.upperPath);

/**
 * The mount this sandbox made at `dir` (compared canonically, as the registry keeps it), when it is still mounted and
 * `matches` its entry: what a repeated request finds already done.
 */
export async function mountedAt(registry: MountRegistry, sandboxId: string, dir: string, matches: (entry: MountEntry) => boolean): Promise<MountEntry | undefined> {
  const hostPath = await realpath(dir).catch(() => null);
  const record = hostPath ? registry.records(sandboxId).find((m) => m.hostPath === hostPath && matches(m.entry)) : undefined;
  return record && (await readMountinfo()).some((m) => m.mountPoint === hostPath) ? record.entry : undefined;
}

// ---- listing and unmounting ----

const within = (path: string, dir: string) => path === dir || path.startsWith(dir + "/");

/** `a` must be unmounted before `b`: it reads from inside `b`, or is mounted inside it. */
function dependsOn(a: MountRecord, b: MountRecord): boolean {
  if (a === b) return false;
  return a.hostSources.some((s) => within(s, b.hostPath)) || (a.hostPath !== b.hostPath && within(a.hostPath, b.hostPath));
}

/** Orders records so that each comes before everything it depends on (overlays before their lowers). */
export function unmountOrder(records: MountRecord[]): MountRecord[] {
  const left = [...records];
  const order: MountRecord[] = [];
  while (left.length) {
    // Newest first among the free ones; a cycle (which mounting cannot make) falls back to newest first.
    const free = left.findLastIndex((r) => !left.some((o) => dependsOn(o, r)));
    const [next] = left.splice(free >= 0 ? free : left.length - 1, 1);
    order.push(next!);
  }
  return order;
}

/** The sandbox's mounts that are still mounted; ones that vanished (unmounted behind the agent's back) are forgotten. */
export async function listMounts(registry: MountRegistry, sandboxId: string): Promise<MountEntry[]> {
  const mounted = new Map((await readMountinfo()).map((m) => [m.mountPoint, m]));
  const out: MountEntry[] = [];
  for (const r of registry.records(sandboxId)) {
    const info = mounted.get(r.hostPath);
    // The options as the kernel has them now (nosuid, nodev, ro), not as they were asked for.
    if (info) out.push({ ...r.entry, options: info.options });
    else registry.forget(sandboxId, r.hostPath);
  }
  return out;
}

async function unmountHost(hostPath: string, fuse: boolean): Promise<void> {
  await runQuiet(unmountArgv(hostPath, fuse));
}

async function unmountRecord(r: MountRecord): Promise<void> {
  if (r.stop) await r.stop();
  else await unmountHost(r.hostPath, r.fuse);
}

/**
 * Unmounts the mount at `dir` and, first, every registered mount that depends on it (an overlay over it).
 * A mount the registry does not know (made before the agent restarted) is unmounted too if it is in mountinfo.
 * Returns the sandbox paths unmounted, in order.
 */
export async function unmountPath(registry: MountRegistry, sandboxId: string, dir: string, path: string): Promise<string[]> {
  const hostPath = await realpath(dir).catch(() => dir);
  const infos = await readMountinfo();
  const records = registry.records(sandboxId).filter((r) => infos.some((m) => m.mountPoint === r.hostPath));
  const target = records.find((r) => r.hostPath === hostPath);
  if (!target) {
    const info = infos.findLast((m) => m.mountPoint === hostPath);
    if (!info) throw new AgentError("not_found", `path: nothing is mounted at ${path}`, "path");
    await unmountHost(hostPath, isFuseType(info.fstype));
    return [path];
  }
  const doomed = new Set([target]);
  for (let grew = true; grew; ) {
    grew = false;
    for (const r of records) {
      if (doomed.has(r) || ![...doomed].some((d) => dependsOn(r, d))) continue;
      doomed.add(r);
      grew = true;
    }
  }
  const done: string[] = [];
  for (const r of unmountOrder([...doomed])) {
    await unmountRecord(r);
    registry.forget(sandboxId, r.hostPath);
    done.push(r.entry.path);
  }
  return done;
}

/**
 * Takes down everything mounted for a sandbox before its root directory is deleted: its registered mounts in
 * dependency order, then anything else still mounted below its root, deepest and newest first. Throws if
 * something stays mounted, so the caller never deletes through a live mount.
 */
export async function unmountSandbox(registry: MountRegistry, sandboxId: string, hostRoot: string): Promise<string[]> {
  const root = await realpath(hostRoot).catch(() => null);
  const done: string[] = [];
  const mounted = new Set((await readMountinfo()).map((m) => m.mountPoint));
  for (const r of unmountOrder(registry.records(sandboxId))) {
    if (mounted.has(r.hostPath) || r.stop) await unmountRecord(r);
    registry.forget(sandboxId, r.hostPath);
    done.push(r.entry.path);
  }
  if (!root) return done;
  const below = async () => (await readMountinfo()).filter((m) => within(m.mountPoint, root));
  for (const m of (await below()).reverse()) {
    await unmountHost(m.mountPoint, isFuseType(m.fstype));
    done.push(m.mountPoint.slice(root.length) || "/");
  }
  const left = await below();
  if (left.length) throw new AgentError("tool_failed", `still mounted below the sandbox's root after unmounting: ${left.map((m) => m.mountPoint).join(", ")}`);
  return done;
}
