// The default backup's single pass, the agent's own (tar → node-tar → zstd, two hashes) against the native engine
// (`snapflow-lazy pack`), on the same tree: each run is a fresh Node process calling archiveWithManifest (the code
// GET /v1/archive runs) with the archive going to /dev/null, timed by /usr/bin/time, so wall and CPU-seconds
// (user + sys) cover the agent and every child it reaped (tar, zstd, snapflow-lazy). The two alternate run by run
// (ABAB…, then BABA…) so they share the machine's moods; the medians are printed as JSON. The last manifests of the
// two are compared entry by entry.
// Usage: node scripts/experiments/pack-engine.ts DIR [RUNS]     (native/lazy/bin/snapflow-lazy built first)
import { spawnSync } from "node:child_process";
import { createWriteStream, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { isDeepStrictEqual } from "node:util";
import { archiveWithManifest } from "../../container/archive/archive.ts";

type Engine = "native" | "node";
const HERE = new URL(".", import.meta.url).pathname;
const BIN = join(HERE, "../../native/lazy/bin");

if (process.argv[2] === "--one") {
  // One pass, in this process: print its result.
  const [, , , engine, dir, manifestOut] = process.argv as [string, string, string, Engine, string, string];
  const r = await archiveWithManifest(dir, { kind: "tar", compression: "zstd" }, createWriteStream("/dev/null"), { manifestOut, engine });
  console.log(JSON.stringify(r));
} else {
  const [, , dir, runsArg = "3"] = process.argv;
  if (!dir) throw new Error("usage: pack-engine.ts DIR [RUNS]");
  const work = mkdtempSync(join(tmpdir(), "pack-engine-"));
  const env = { ...process.env, PATH: `${BIN}:${process.env.PATH ?? ""}` };
  const runs: Record<Engine, { wall: number; cpu: number; bytes: number; sha256: string }[]> = { native: [], node: [] };
  /** One pass in a fresh process under /usr/bin/time: wall, user + sys of it and its reaped children, its result. */
  const spawnTimed = (engine: Engine, manifestOut: string) => {
    const p = spawnSync("/usr/bin/time", ["-f", "TIME %e %U %S", process.execPath, join(HERE, "pack-engine.ts"), "--one", engine, dir, manifestOut], { env, encoding: "utf8" });
    if (p.status !== 0) throw new Error(`${engine} pass failed: ${p.stderr}`);
    const [wall, user, sys] = /TIME ([\d.]+) ([\d.]+) ([\d.]+)/.exec(p.stderr)!.slice(1).map(Number) as [number, number, number];
    const r = JSON.parse(p.stdout.trim().split("\n").at(-1)!) as { bytes: number; sha256: string; engine: Engine };
    if (r.engine !== engine) throw new Error(`asked for the ${engine} pass, ${r.engine} made it (is native/lazy/bin/snapflow-lazy built?)`);
    return { wall, cpu: user + sys, bytes: r.bytes, sha256: r.sha256 };
  };
  for (let i = 0; i < Number(runsArg); i++) {
    const order: Engine[] = i % 2 === 0 ? ["node", "native"] : ["native", "node"];
    for (const engine of order) {
      const manifestOut = join(work, `${engine}.json`);
      const r = spawnTimed(engine, manifestOut);
      runs[engine].push(r);
      console.error(`run ${i + 1} ${engine}: wall ${r.wall.toFixed(2)} s, CPU ${r.cpu.toFixed(2)} s, ${r.bytes} bytes, sha256 ${r.sha256.slice(0, 12)}`);
    }
  }
  const a = JSON.parse(readFileSync(join(work, "node.json"), "utf8")) as { entries: unknown[] };
  const b = JSON.parse(readFileSync(join(work, "native.json"), "utf8")) as { entries: unknown[] };
  const equalEntries = a.entries.filter((e, i) => isDeepStrictEqual(e, b.entries[i])).length;
  const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]!;
  const summary = Object.fromEntries((["node", "native"] as Engine[]).map((e) => [e, { wallS: median(runs[e].map((r) => r.wall)), cpuS: median(runs[e].map((r) => r.cpu)), walls: runs[e].map((r) => r.wall), cpus: runs[e].map((r) => r.cpu), archiveBytes: runs[e][0]!.bytes }]));
  console.log(JSON.stringify({ dir, runs: Number(runsArg), ...summary, manifests: { entries: a.entries.length, equalEntries, wholeEqual: isDeepStrictEqual(a, b) } }, null, 1));
  rmSync(work, { recursive: true, force: true });

}
