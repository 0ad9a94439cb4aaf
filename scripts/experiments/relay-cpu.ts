// What relaying an archive costs the Worker: workerd's CPU-seconds (utime + stime from /proc, all its processes
// below wrangler dev) per default backup (tar-zst-pipe: the agent streams tar | zstd, the Worker cuts it into parts
// and uploads them), for one or more checkouts of the project, alternated run by run so that they share the
// machine's moods. Each checkout gets its own private stack (its own wrangler dev, agent and store) holding a real
// copy of the peers race's npm workspace (scripts/bench/peers/npm-workspace.ts) in sandbox "relay"'s /workspace.
// Prints one line per run and, at the end, medians per checkout as JSON. Emulator figures (local workerd,
// SeaweedFS on loopback), not production ones.
// Usage: [STRATEGY=tar-zst-pipe] node scripts/experiments/relay-cpu.ts RUNS DIR [DIR...]   (DIR: a checkout with node_modules)
import { execSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ensureNpmWorkspace } from "../bench/peers/npm-workspace.ts";

const [runsArg = "3", ...dirs] = process.argv.slice(2);
if (!dirs.length) throw new Error("usage: relay-cpu.ts RUNS DIR [DIR...]");
const STRATEGY = process.env.STRATEGY ?? "tar-zst-pipe";
const SANDBOX = "relay";
const TICKS = Number(execSync("getconf CLK_TCK").toString()) || 100;
const log = (l: string) => console.error(l);

/** utime + stime (s) of every process named `name` below `root` (itself included). */
function cpuBelow(root: number, name: string): number {
  const parent = new Map<number, number>();
  const comm = new Map<number, string>();
  const times = new Map<number, number>();
  for (const e of readdirSync("/proc")) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const stat = readFileSync(`/proc/${e}/stat`, "utf8");
      const close = stat.lastIndexOf(")");
      const f = stat.slice(close + 2).split(" ");
      comm.set(Number(e), stat.slice(stat.indexOf("(") + 1, close));
      parent.set(Number(e), Number(f[1]));
      times.set(Number(e), (Number(f[11]) + Number(f[12])) / TICKS);
    } catch {
      // gone meanwhile
    }
  }
  let sum = 0;
  for (const [pid, c] of comm) {
    if (c !== name) continue;
    for (let p: number | undefined = pid; p; p = parent.get(p)) if (p === root) { sum += times.get(pid)!; break; }
  }
  return sum;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

const workspace = await ensureNpmWorkspace(log);
type Figure = "run" | "wallS" | "workerdS" | "archiveMB" | "workerdSPerGB" | "transferS" | "reads";
type Sample = Record<Figure, number> & { sha256: string };
type Lab = { dir: string; stack: { stop(): Promise<void>; wranglerPid: number; agentPid: number }; api: any; state: string; samples: Sample[] };
const labs: Lab[] = [];
try {
  for (const dir of dirs) {
    const { startStack, freePort } = await import(join(dir, "scripts/stack/stack.ts"));
    const { apiClient } = await import(join(dir, "scripts/cli/api-client.ts"));
    const state = mkdtempSync(join(tmpdir(), "snapflow-relay-cpu-"));
    const stack = await startStack({ port: await freePort(), privateDir: state, log: (l: string) => log(`${dir}: ${l}`), startupTriggers: false });
    const api = apiClient(stack.apiUrl, stack.apiToken);
    const ws = join(state, "sandboxes", SANDBOX, "workspace");
    mkdirSync(ws, { recursive: true });
    execSync(`cp -a --reflink=never ${JSON.stringify(workspace + "/.")} ${JSON.stringify(ws + "/")}`);
    labs.push({ dir, stack, api, state, samples: [] });
  }
  const runs = Number(runsArg);
  for (let run = 1; run <= runs; run++) {
    // Alternated: odd runs in the order given, even runs reversed.
    for (const lab of run % 2 ? labs : [...labs].reverse()) {
      execSync("sync");
      const w0 = cpuBelow(lab.stack.wranglerPid, "workerd");
      const t0 = performance.now();
      const b = await lab.api.startBackup({ sandboxId: SANDBOX, path: "/workspace", strategy: STRATEGY });
      let s: { status: string; error?: string; steps: Record<string, Record<string, unknown>> };
      for (;;) {
        s = await lab.api.call("GET", `/api/backups/${b.id}`);
        if (s.status === "complete") break;
        if (s.status === "errored" || s.status === "terminated") throw new Error(`${lab.dir}: backup ${b.id} ${s.status}: ${s.error}`);
        await new Promise((r) => setTimeout(r, 100));
      }
      const wallMs = performance.now() - t0;
      const workerdS = cpuBelow(lab.stack.wranglerPid, "workerd") - w0;
      const t = s.steps.transfer!;
      const sample = { run, wallS: wallMs / 1000, workerdS, archiveMB: Number(t.bytes) / 1e6, workerdSPerGB: workerdS / (Number(t.bytes) / 1e9), transferS: Number(t.ms) / 1000, reads: Number(t.reads ?? NaN), sha256: String(t.sha256) };
      lab.samples.push(sample);
      log(`${lab.dir} run ${run}: ${JSON.stringify(sample)}`);
      await lab.api.call("DELETE", `/api/snapshots/${b.snapshotId}`).catch((e: Error) => log(`could not delete ${b.snapshotId}: ${e.message}`));
    }
  }
  const summary = labs.map((l) => ({
    dir: l.dir, runs: l.samples.length,
    median: Object.fromEntries((["wallS", "workerdS", "workerdSPerGB", "archiveMB", "transferS", "reads"] as const).map((k) => [k, median(l.samples.map((x) => x[k]))])),
    min: Object.fromEntries((["wallS", "workerdS"] as const).map((k) => [k, Math.min(...l.samples.map((x) => x[k]))])),
    max: Object.fromEntries((["wallS", "workerdS"] as const).map((k) => [k, Math.max(...l.samples.map((x) => x[k]))])),
    archives: [...new Set(l.samples.map((x) => x.sha256))],
    samples: l.samples,
  }));
  console.log(JSON.stringify(summary, null, 1));
} finally {
  for (const l of labs) {
    await l.stack.stop().catch(() => {});
    rmSync(l.state, { recursive: true, force: true });
  }
}
