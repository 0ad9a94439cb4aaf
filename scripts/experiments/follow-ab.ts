// Following a run by held status requests (?wait=, the default since 010b779) against polling every 100 ms: does the
// Worker's looking-again every 20 ms inside a held request slow the run it watches, or cost the stack CPU? On a private
// stack, a 10 MB tree (ten 1 MB files of random bytes, what a sleep uploads) backed up RUNS times per way with
// tar-zst-pipe (the Worker relays it, as overlay-delta does), alternated; per run: wall (POST → seen complete), the
// Workflow's own wall (first step's start → last step's end) and the stack's CPU-seconds. Emulator figures.
// Usage: node scripts/experiments/follow-ab.ts [RUNS=8]
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { apiClient } from "../cli/api-client.ts";
import { stackCpuMeter } from "../bench/peers/stack-cpu.ts";
import { snapflowRuns, type Following } from "../bench/peers/snapflow-runs.ts";
import { median } from "../../src/matrix/median.ts";
import { freePort, startStack } from "../stack/stack.ts";

const runs = Number(process.argv[2] ?? 8);
const dir = mkdtempSync(join(tmpdir(), "snapflow-follow-ab-"));
const stack = await startStack({ port: await freePort(), privateDir: dir, log: () => {}, startupTriggers: false });
try {
  const api = apiClient(stack.apiUrl, stack.apiToken);
  const ws = join(dir, "sandboxes", "ab", "workspace");
  mkdirSync(ws, { recursive: true });
  for (let i = 0; i < 10; i++) writeFileSync(join(ws, `f${i}`), randomBytes(1_000_000));
  const pids = () => ({ agent: stack.parts.agent().child.pid!, wrangler: stack.wranglerPid, store: stack.parts.store().pid });
  const seen: Record<Following, { wall: number[]; workflow: number[]; cpu: number[]; requests: number[] }> = { wait: { wall: [], workflow: [], cpu: [], requests: [] }, poll: { wall: [], workflow: [], cpu: [], requests: [] } };
  // One of each first, not counted (warm caches, the Worker's first compile).
  for (const how of ["wait", "poll"] as const) await snapflowRuns(api, how).backup("ab", "tar-zst-pipe");
  for (let i = 0; i < runs; i++) {
    for (const how of (i % 2 ? ["poll", "wait"] : ["wait", "poll"]) as Following[]) {
      const meter = stackCpuMeter(pids);
      const r = await snapflowRuns(api, how).backup("ab", "tar-zst-pipe");
      const cpu = meter.since();
      const steps = Object.values(r.raw) as { startedAt?: number; endedAt?: number }[];
      const wf = Math.max(...steps.map((x) => x.endedAt ?? 0)) - Math.min(...steps.map((x) => x.startedAt ?? Infinity));
      seen[how].wall.push(r.wallMs);
      seen[how].workflow.push(wf);
      seen[how].cpu.push(cpu ? cpu.total : NaN);
      seen[how].requests.push(r.polls);
    }
  }
  for (const how of ["wait", "poll"] as const) {
    const s = seen[how];
    console.log(JSON.stringify({ how, runs, wallMs: median(s.wall), workflowMs: median(s.workflow), stackCpuS: Number((median(s.cpu) ?? NaN).toFixed(3)), statusRequests: median(s.requests), wall: s.wall, workflow: s.workflow }));
  }
} finally {
  await stack.stop();
  rmSync(dir, { recursive: true, force: true });
}
