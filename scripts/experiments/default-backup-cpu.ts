// The default backup before and after the engine uploads its own parts (issue 23): wall time and CPU-seconds per part
// of the stack (agent, engine, Worker, wrangler, store: scripts/bench/peers/stack-cpu.ts) per backup of the peers race's
// npm workspace, for each strategy given, alternated run by run on one private stack of this checkout so that they
// share the machine's moods. The Worker's figure is less the status polls this script made (each measured on the
// completed run right after, as the race does); they are made once a second, not every 100 ms as the race's, because
// at 100 ms they cost the Worker more than the backup does on the default path, and subtracting an estimate of that
// size from a figure of 0.1 CPU-s left noise (negative figures). Wall time is the Workflow's own total (totalMs).
// Emulator figures (local workerd, SeaweedFS on loopback).
// Usage: node scripts/experiments/default-backup-cpu.ts RUNS STRATEGY [STRATEGY...]
//   e.g. RUNS=3 tar-zst-pipe tar-zst-presigned-multipart   (the default before, the default after)
// SUBDIR=src backs up only that directory of the workspace (the npm workspace's src: ~1 MB): what a run costs the
// Worker whatever its size (the Workflow's steps, records, URLs), against the whole tree's per-GB figure.
import { execSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ensureNpmWorkspace } from "../bench/peers/npm-workspace.ts";
import type { RunStatus } from "../cli/api-client.ts";
import { stackCpuMeter, type StackPids } from "../bench/peers/stack-cpu.ts";
import { apiClient } from "../cli/api-client.ts";
import { freePort, startStack } from "../stack/stack.ts";

const [runsArg = "3", ...strategies] = process.argv.slice(2);
if (!strategies.length) throw new Error("usage: default-backup-cpu.ts RUNS STRATEGY [STRATEGY...]");
const SANDBOX = "cpu";
const CALIBRATION_POLLS = 10;
const POLL_MS = Number(process.env.POLL_MS ?? 1000);
const log = (l: string) => console.error(l);
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

const workspace = await ensureNpmWorkspace(log);
const state = mkdtempSync(join(tmpdir(), "snapflow-default-backup-cpu-"));
const stack = await startStack({ port: await freePort(), privateDir: state, log, startupTriggers: false });
type Sample = { run: number; wallS: number; archiveMB: number; parts: number; uploadedBy: string; worker: number; workerPolls: number; workerPerGB: number; agent: number; engine: number; wrangler: number; store: number; total: number; steps: Record<string, number> };
const samples = new Map<string, Sample[]>(strategies.map((s) => [s, []]));
try {
  const api = apiClient(stack.apiUrl, stack.apiToken);
  const status = (id: string) => api.call<RunStatus>("GET", `/api/backups/${id}`);
  const backup = async (strategy: string) => {
    const t0 = performance.now();
    const b = await api.startBackup({ sandboxId: SANDBOX, path: "/workspace", strategy });
    for (let polls = 1; ; polls++) {
      const s = await status(b.id);
      if (s.status === "complete") return { id: b.id, snapshotId: b.snapshotId, polls, wallMs: s.totalMs ?? performance.now() - t0, steps: Object.fromEntries(Object.entries(s.steps).map(([k, v]) => [k, v.ms])), raw: s.steps };
      if (s.status === "errored" || s.status === "terminated") throw new Error(`backup ${b.id} ${s.status}: ${s.error}`);
      await new Promise((r) => setTimeout(r, POLL_MS));
    }
  };
  const pids = (): StackPids => ({ agent: stack.parts.agent().child.pid!, wrangler: stack.wranglerPid, store: stack.parts.store().pid });
  const ws = join(state, "sandboxes", SANDBOX, "workspace");
  mkdirSync(ws, { recursive: true });
  const from = process.env.SUBDIR ? join(workspace, process.env.SUBDIR) : workspace;
  execSync(`cp -a --reflink=never ${JSON.stringify(from + "/.")} ${JSON.stringify(ws + "/")}`);
  const perPoll = async (id: string) => {
    const meter = stackCpuMeter(pids);
    for (let i = 0; i < CALIBRATION_POLLS; i++) {
      await status(id);
      await new Promise((r) => setTimeout(r, POLL_MS));
    }
    const cpu = meter.since();
    return cpu ? cpu.worker / CALIBRATION_POLLS : 0;
  };
  const runs = Number(runsArg);
  for (let run = 1; run <= runs; run++) {
    for (const strategy of run % 2 ? strategies : [...strategies].reverse()) {
      execSync("sync");
      const meter = stackCpuMeter(pids);
      const b = await backup(strategy);
      const cpu = meter.since();
      if (!cpu) throw new Error("a part of the stack restarted during the run");
      const pollCost = b.polls * (await perPoll(b.id));
      const t = b.raw.transfer as Record<string, unknown>;
      const archiveMB = Number(t.bytes) / 1e6;
      const worker = cpu.worker - pollCost;
      const sample: Sample = {
        run, wallS: b.wallMs / 1000, archiveMB, parts: Number(t.parts), uploadedBy: String(t.uploadedBy ?? "Worker"), worker: round(worker), workerPolls: round(pollCost), workerPerGB: round(worker / (archiveMB / 1000)),
        agent: cpu.agent, engine: cpu.engine, wrangler: cpu.wrangler, store: cpu.store, total: round(cpu.total - pollCost), steps: b.steps,
      };
      samples.get(strategy)!.push(sample);
      log(`${strategy} run ${run}: ${JSON.stringify(sample)}`);
      await api.call("DELETE", `/api/snapshots/${b.snapshotId}`).catch((e: Error) => log(`could not delete ${b.snapshotId}: ${e.message}`));
    }
  }
  const keys = ["wallS", "agent", "engine", "worker", "workerPolls", "workerPerGB", "store", "wrangler", "total", "archiveMB"] as const;
  console.log(JSON.stringify(strategies.map((s) => ({ strategy: s, runs: samples.get(s)!.length, median: Object.fromEntries(keys.map((k) => [k, round(median(samples.get(s)!.map((x) => x[k])))])), samples: samples.get(s) })), null, 1));
} finally {
  await stack.stop().catch(() => {});
  rmSync(state, { recursive: true, force: true });
}

function round(x: number): number {
  return Math.round(x * 1000) / 1000;
}
