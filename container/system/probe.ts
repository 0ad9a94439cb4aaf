// What this sandbox can do: the kernel and its filesystems, FUSE, CAP_SYS_ADMIN, the tools the strategies
// drive (with versions), cores, memory and free disk. The Worker's probe step uses it to decide which
// strategies can run here and to say why the others cannot.
import { execFile } from "node:child_process";
import { access, readFile, stat, statfs } from "node:fs/promises";
import { constants } from "node:fs";
import { availableParallelism, freemem, release, totalmem } from "node:os";
import { z } from "zod";
import { safeJson } from "./engine-answer.ts";
import { findOnPath } from "./find-on-path.ts";
import { SNAPFLOW_RELEASE, TOOLS, type ProbeResult, type ToolName } from "../contract/protocol.ts";

type ToolInfo = { path: string; version: string };

// Asking each tool its version spawns ~15 processes (100–180 ms a probe). A tool's version changes only with its
// binary, so it is remembered by path, size and mtime: a tool installed or upgraded later is asked again. In the
// image every sandbox's agent is a fresh process, so its first probe (a wake's first step) would pay that each time:
// the image asks once, at build, and the agent starts with the answers (TOOL_VERSIONS_FILE).
const versions = new Map<string, Promise<string>>();

const keyOf = (path: string, size: number | undefined, mtimeMs: number | undefined) => `${path}\0${size}\0${mtimeMs}`;

async function toolInfo(name: ToolName): Promise<ToolInfo | null> {
  const path = await findOnPath(name);
  if (!path) return null;
  const st = await stat(path).catch(() => null);
  const key = keyOf(path, st?.size, st?.mtimeMs);
  let version = versions.get(key);
  if (!version) {
    version = printed([path, ...TOOLS[name].version]).then((out) => versionIn(name, out.stdout, out.stderr));
    versions.set(key, version);
  }
  return { path, version: await version };
}

/** Where the image keeps its tools' versions, asked at build (Dockerfile); the agent reads it when it starts. */
export const TOOL_VERSIONS_FILE = "/opt/snapflow/tool-versions.json";

const ToolVersions = z.object({
  version: z.literal(1),
  tools: z.array(z.object({ path: z.string(), size: z.number(), mtimeMs: z.number(), version: z.string().max(64) }).strict()).max(100),
}).strict();

/** This machine's tools' versions, each with the binary it was asked of (written into the image at build). */
export async function toolVersionsNow(): Promise<z.infer<typeof ToolVersions>> {
  const names = Object.keys(TOOLS) as ToolName[];
  const infos = (await Promise.all(names.map(toolInfo))).filter((i): i is ToolInfo => i !== null);
  const tools = await Promise.all(infos.map(async (i) => {
    const st = await stat(i.path);
    return { path: i.path, size: st.size, mtimeMs: st.mtimeMs, version: i.version };
  }));
  return { version: 1, tools };
}

/**
 * Starts the probe with versions asked before (the image's file): each is used only while its binary has the same
 * path, size and mtime, so a tool changed since is asked again. Answers how many were taken; a file that is not
 * one (absent, or not this shape) is none.
 */
export async function seedToolVersions(file = TOOL_VERSIONS_FILE): Promise<number> {
  const text = await readFile(file, "utf8").catch(() => null);
  const parsed = text === null ? undefined : ToolVersions.safeParse(safeJson(text));
  if (!parsed?.success) return 0;
  for (const t of parsed.data.tools) versions.set(keyOf(t.path, t.size, t.mtimeMs), Promise.resolve(t.version));
  return parsed.data.tools.length;
}

/**
 * What a tool prints when asked its version, on either stream and whatever its exit status: unsquashfs -version
 * exits 1, mkfs.erofs before 1.8 prints its version and then refuses -V, erofs-utils 1.4 prints on stderr.
 */
function printed(argv: string[]): Promise<{ stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(argv[0]!, argv.slice(1), { timeout: 3000, maxBuffer: 1 << 20, encoding: "utf8" }, (_e, stdout, stderr) => resolve({ stdout: stdout ?? "", stderr: stderr ?? "" }));
  });
}

const VERSION = /\d+\.\d+(\.\d+)?/;

/**
 * The version in a tool's answer: from the first line that names the tool and holds a version (fuse-overlayfs
 * prints libfuse's "fusermount3 version: 3.14.0" before its own "fuse-overlayfs: version 1.10"), else the first line
 * holding one (zstd says "Zstandard", aria2c "aria2"); stdout before stderr. "unknown" when none does.
 */
export function versionIn(name: string, stdout: string, stderr: string): string {
  const lines = `${stdout}\n${stderr}`.split("\n").filter((l) => VERSION.test(l));
  const line = lines.find((l) => l.toLowerCase().includes(name.toLowerCase())) ?? lines[0];
  return line?.match(VERSION)?.[0] ?? "unknown";
}

/** CAP_SYS_ADMIN is bit 21 of the effective capability mask. */
export function hasCapSysAdmin(procStatus: string): boolean {
  const hex = procStatus.match(/^CapEff:\s*([0-9a-f]+)/m)?.[1];
  return hex ? (BigInt(`0x${hex}`) & (1n << 21n)) !== 0n : false;
}

export async function probe(diskPath: string): Promise<ProbeResult> {
  const [filesystems, status, fuse, fs] = await Promise.all([
    readFile("/proc/filesystems", "utf8").catch(() => ""),
    readFile("/proc/self/status", "utf8").catch(() => ""),
    access("/dev/fuse", constants.R_OK | constants.W_OK).then(() => true, () => false),
    statfs(diskPath),
  ]);
  const names = Object.keys(TOOLS) as ToolName[];
  const infos = await Promise.all(names.map(toolInfo));
  return {
    agent: { release: SNAPFLOW_RELEASE },
    kernel: release(),
    filesystems: filesystems.split("\n").map((l) => l.split("\t").pop()!.trim()).filter(Boolean),
    fuse,
    capSysAdmin: hasCapSysAdmin(status),
    root: process.getuid?.() === 0,
    tools: Object.fromEntries(names.map((n, i) => [n, infos[i] ?? null])),
    cpus: availableParallelism(),
    memory: { totalBytes: totalmem(), freeBytes: freemem() },
    disk: { path: diskPath, freeBytes: fs.bavail * fs.bsize, totalBytes: fs.blocks * fs.bsize },
    runtime: "Bun" in globalThis ? `bun ${(globalThis as { Bun?: { version: string } }).Bun?.version}` : `node ${process.version}`,
  };
}
