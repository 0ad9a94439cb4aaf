// How long snapflow-lazy takes to answer with a large index: exec → its ready line, and its own readyMs (index load,
// per-chunk state, FUSE mount, the first stat), for a synthetic index of N chunks (8,686 is the 5 GB set's), with no
// prefetch and nothing fetched. Each binary named is run `runs` times, alternated, so they share the machine's moods.
// Run as root (a FUSE mount):
//   node scripts/experiments/helper-start.ts [chunks] [runs] BINARY...
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";

const [chunksArg = "8686", runsArg = "12", ...bins] = process.argv.slice(2);
if (!bins.length) throw new Error("usage: helper-start.ts [chunks] [runs] BINARY...");
const base = mkdtempSync(join(tmpdir(), "snapflow-helper-start-"));
const chunks = Array.from({ length: Number(chunksArg) }, (_, i) => ({ sha256: createHash("sha256").update(String(i)).digest("hex"), offset: i * 600_000, size: 600_000 }));
writeFileSync(join(base, "index.json"), JSON.stringify({ version: 1, size: chunks.length * 600_000, sha256: chunks[0]!.sha256, avgChunk: 524_288, chunks }));
writeFileSync(join(base, "urls.json"), "{}");

async function start(bin: string): Promise<{ ms: number; readyMs: number }> {
  const work = join(base, "work");
  rmSync(work, { recursive: true, force: true });
  mkdirSync(join(work, "fuse"), { recursive: true });
  const t = performance.now();
  const child = spawn(bin, ["mount", "--index", join(base, "index.json"), "--urls", join(base, "urls.json"), "--cache", join(work, "cache"), "--mountpoint", join(work, "fuse"), "--status", join(work, "status.json"), "--prefetch", "0"], { stdio: ["ignore", "pipe", "inherit"] });
  const line = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).once("line", resolve);
    child.once("close", (code) => reject(new Error(`${bin} exited ${code} before it was ready`)));
  });
  const ms = performance.now() - t;
  child.kill("SIGTERM");
  await new Promise((r) => child.once("close", r));
  return { ms, readyMs: (JSON.parse(line) as { readyMs: number }).readyMs };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const got = new Map<string, { ms: number; readyMs: number }[]>(bins.map((b) => [b, []]));
try {
  for (let r = 0; r < Number(runsArg); r++) for (const bin of bins) got.get(bin)!.push(await start(bin));
  for (const [bin, runs] of got) {
    console.log(`${bin}: ${chunks.length} chunks, exec → ready ${median(runs.map((r) => r.ms)).toFixed(1)} ms, readyMs ${median(runs.map((r) => r.readyMs))} (medians of ${runs.length})`);
  }
} finally {
  rmSync(base, { recursive: true, force: true });
}
