// What this sandbox can do: the kernel and its filesystems, FUSE, CAP_SYS_ADMIN, the tools the strategies
// drive (with versions), cores, memory and free disk. The Worker's probe step uses it to decide which
// strategies can run here and to say why the others cannot.
import { access, readFile, stat, statfs } from "node:fs/promises";
import { constants } from "node:fs";
import { availableParallelism, freemem, release, totalmem } from "node:os";
import { findOnPath } from "./find-on-path.ts";
import { TOOLS, type ProbeResult, type ToolName } from "./protocol.ts";
import { runTool } from "./run-tool.ts";

type ToolInfo = { path: string; version: string };

// Asking each tool its version spawns ~15 processes (100–180 ms a probe, every run). A tool's version changes only
// with its binary, so it is remembered by path, size and mtime: a tool installed or upgraded later is asked again.
const versions = new Map<string, Promise<string>>();

async function toolInfo(name: ToolName): Promise<ToolInfo | null> {
  const path = await findOnPath(name);
  if (!path) return null;
  const st = await stat(path).catch(() => null);
  const key = `${path}\0${st?.size}\0${st?.mtimeMs}`;
  let version = versions.get(key);
  if (!version) {
    version = runTool([path, ...TOOLS[name].version], 3000).catch((e: Error) => e.message).then((out) => {
      const line = out.split("\n").find((l) => /\d+\.\d+/.test(l)) ?? "";
      return line.match(/\d+\.\d+(\.\d+)?/)?.[0] ?? "unknown";
    });
    versions.set(key, version);
  }
  return { path, version: await version };
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
