// What the 10 MB incremental costs (tar-zst-delta on the npm workspace, the peers race's change): wall time from the
// POST to the first poll that sees it complete, the steps, and CPU-seconds per process (agent, engine, Worker less
// its status polls, store: scripts/bench/peers/stack-cpu.ts), for checkouts side by side, alternated run by run so
// that they share the machine's moods. Each checkout gets its own private stack with a real copy of the npm workspace
// in sandbox "delta"'s /workspace; each run makes a full backup (not measured: the incremental's base, whose
// manifest the agent keeps), applies the seeded 10 MB change, measures the incremental, and undoes the change.
// A DIR written DIR:node runs that checkout's agent with SNAPFLOW_PACK_ENGINE=node (its own pass, not the engine).
// Prints one line per run and, at the end, medians per checkout as JSON. Emulator figures, not production ones.
// Usage: node scripts/experiments/delta-engine.ts RUNS DIR[:node] [DIR[:node]...]   (DIR: a checkout with node_modules)
import { execSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { applyChange } from "../bench/peers/change.ts";
import { ensureNpmWorkspace } from "../bench/peers/npm-workspace.ts";
import { stackCpuMeter, type StackPids } from "../bench/peers/stack-cpu.ts";
import { snapflowRuns, type SnapflowRun } from "../bench/peers/snapflow-runs.ts";

const [runsArg = "3", ...args] = process.argv.slice(2);
if (!args.length) throw new Error("usage: delta-engine.ts RUNS DIR[:node] [DIR[:node]...]");
const SANDBOX = "delta";
const CALIBRATION_POLLS = 10;
const log = (l: string) => console.error(l);
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

type Sample = { run: number; wallS: number; transferS: number; ttfbS: number; manifestStoreS: number; archiveMB: number; agent: number; engine: number; worker: number; store: number; total: number; polls: number; baseFrom: string; manifestBytes: number };
type Lab = { label: string; stack: any; api: any; snap: ReturnType<typeof snapflowRuns>; pids: () => StackPids; state: string; samples: Sample[] };

const workspace = await ensureNpmWorkspace(log);
const labs: Lab[] = [];
try {
  for (const arg of args) {
    const [dir, engine] = arg.split(":") as [string, string | undefined];
    const { startStack, freePort } = await import(join(dir, "scripts/stack/stack.ts"));
    const { apiClient } = await import(join(dir, "scripts/cli/api-client.ts"));
    const state = mkdtempSync(join(tmpdir(), "snapflow-delta-engine-"));
    // The stack hands SNAPFLOW_PACK_ENGINE from this process's environment to its agent.
    if (engine === "node") process.env.SNAPFLOW_PACK_ENGINE = "node";
    else delete process.env.SNAPFLOW_PACK_ENGINE;
    const stack = await startStack({ port: await freePort(), privateDir: state, log: (l: string) => log(`${arg}: ${l}`), startupTriggers: false });
    delete process.env.SNAPFLOW_PACK_ENGINE;
    const ws = join(state, "sandboxes", SANDBOX, "workspace");
    mkdirSync(ws, { recursive: true });
    execSync(`cp -a --reflink=never ${JSON.stringify(workspace + "/.")} ${JSON.stringify(ws + "/")}`);
    const pids = (): StackPids => ({ agent: stack.parts.agent().child.pid!, wrangler: stack.wranglerPid, store: stack.parts.store().pid });
    const api = apiClient(stack.apiUrl, stack.apiToken);
    labs.push({ label: arg, stack, api, snap: snapflowRuns(api), pids, state, samples: [] });
  }
  const runs = Number(runsArg);
  for (let run = 1; run <= runs; run++) {
    for (const lab of run % 2 ? labs : [...labs].reverse()) {
      const ws = join(lab.state, "sandboxes", SANDBOX, "workspace");
      const full = await lab.snap.backup(SANDBOX, "tar-zst-pipe");
      const change = await applyChange(ws, 1, 10_000_000);
      execSync("sync");
      const meter = stackCpuMeter(lab.pids);
      let delta: SnapflowRun;
      try {
        delta = await lab.snap.backup(SANDBOX, "tar-zst-delta", full.snapshotId);
      } finally {
        await change.undo();
      }
      const cpu = meter.since();
      // What the status polls cost the Worker, measured on the completed run at the same pace (as the race does).
      const calibration = stackCpuMeter(lab.pids);
      for (let i = 0; i < CALIBRATION_POLLS; i++) {
        await lab.snap.poll(delta);
        await new Promise((r) => setTimeout(r, 100));
      }
      const perPoll = (calibration.since()?.worker ?? 0) / CALIBRATION_POLLS;
      if (!cpu) throw new Error(`${lab.label}: a part of the stack restarted during run ${run}`);
      const worker = Math.max(0, cpu.worker - delta.polls * perPoll);
      const t = delta.raw.transfer as Record<string, any>;
      const sample: Sample = {
        run, wallS: delta.wallMs / 1000, transferS: (delta.steps.transfer ?? 0) / 1000, ttfbS: Number(t.ttfbMs) / 1000, manifestStoreS: Number(t.manifest?.storeMs) / 1000, archiveMB: Number(t.bytes) / 1e6,
        agent: cpu.agent, engine: cpu.engine, worker, store: cpu.store, total: cpu.agent + cpu.engine + worker + cpu.store, polls: delta.polls,
        baseFrom: String(t.delta?.baseFrom), manifestBytes: Number(t.manifest?.manifestBytes),
      };
      lab.samples.push(sample);
      log(`${lab.label} run ${run}: ${JSON.stringify(sample)} steps ${JSON.stringify(delta.steps)}`);
      if (process.env.DUMP) log(JSON.stringify(t));
      // The delta first: a base a delta needs cannot be deleted.
      for (const id of [delta.snapshotId!, full.snapshotId!]) await lab.api.call("DELETE", `/api/snapshots/${id}`).catch((e: Error) => log(`could not delete ${id}: ${e.message}`));
    }
  }
  const figures = ["wallS", "transferS", "ttfbS", "manifestStoreS", "agent", "engine", "worker", "store", "total", "archiveMB", "manifestBytes"] as const;
  console.log(JSON.stringify(labs.map((l) => ({
    label: l.label, runs: l.samples.length,
    median: Object.fromEntries(figures.map((k) => [k, median(l.samples.map((x) => x[k]))])),
    min: Object.fromEntries(figures.map((k) => [k, Math.min(...l.samples.map((x) => x[k]))])),
    max: Object.fromEntries(figures.map((k) => [k, Math.max(...l.samples.map((x) => x[k]))])),
    baseFrom: [...new Set(l.samples.map((x) => x.baseFrom))],
    samples: l.samples,
  })), null, 1));
} finally {
  for (const l of labs) {
    await l.stack.stop().catch(() => {});
    rmSync(l.state, { recursive: true, force: true });
  }
}
