// What this sandbox can do: the kernel and its filesystems, FUSE, CAP_SYS_ADMIN, the tools the strategies
// drive (with versions), cores, memory and free disk. The Worker's probe step uses it to decide which
// strategies can run here and to say why the others cannot.
import { access, readFile, statfs } from "node:fs/promises";
import { constants } from "node:fs";
import { availableParallelism, freemem, release, totalmem } from "node:os";
import { delimiter, join } from "node:path";
import { TOOLS, type ProbeResult, type ToolName } from "./protocol.ts";
import { runTool } from "./run-tool.ts";

export { TOOLS, type ProbeResult, type ToolName };

async function which(name: string): Promise<string | null> {
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    const candidate = join(dir, name);
    if (await access(candidate, constants.X_OK).then(() => true, () => false)) return candidate;
  }
  return null;
}

async function toolInfo(name: ToolName): Promise<{ path: string; version: string } | null> {
  const path = await which(name);
  if (!path) return null;
  const out = await runTool([path, ...TOOLS[name].version], 3000).catch((e: Error) => e.message);
  const line = out.split("\n").find((l) => /\d+\.\d+/.test(l)) ?? "";
  return { path, version: (line.match(/\d+\.\d+(\.\d+)?/)?.[0] ?? "unknown") };
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
