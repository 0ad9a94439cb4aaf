// What a status poll costs the stack: the peers race follows each snapflow run by GET /api/{backups,restores}/:id
// every 100 ms until it is complete, and workerd's CPU in that span (scripts/bench/peers/stack-cpu.ts) includes those
// polls. On a private stack: one small backup, then CPU-seconds per part over 10 idle seconds, over POLLS polls of
// the completed run at the race's pace, and over 10 idle seconds again. Emulator figures (local workerd, SeaweedFS
// on loopback). Usage: node scripts/experiments/poll-cpu.ts [POLLS=100]
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { apiClient } from "../cli/api-client.ts";
import { stackCpuMeter } from "../bench/peers/stack-cpu.ts";
import { POLL_MS } from "../bench/peers/snapflow-runs.ts";
import { freePort, startStack } from "../stack/stack.ts";

const polls = Number(process.argv[2] ?? 100);
const dir = mkdtempSync(join(tmpdir(), "snapflow-poll-cpu-"));
const stack = await startStack({ port: await freePort(), privateDir: dir, log: () => {}, startupTriggers: false });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
try {
  const api = apiClient(stack.apiUrl, stack.apiToken);
  const ws = join(dir, "sandboxes", "poll", "workspace");
  mkdirSync(ws, { recursive: true });
  for (let i = 0; i < 50; i++) writeFileSync(join(ws, `f${i}`), "x".repeat(1000 * i));
  const pids = () => ({ agent: stack.parts.agent().child.pid!, wrangler: stack.wranglerPid, store: stack.parts.store().pid });
  const b = await api.startBackup({ sandboxId: "poll", path: "/workspace", strategy: "tar-zst-pipe" });
  while ((await api.call<{ status: string }>("GET", `/api/backups/${b.id}`)).status !== "complete") await sleep(POLL_MS);
  await sleep(3000);
  const span = async (what: string, fn: () => Promise<unknown>) => {
    const meter = stackCpuMeter(pids);
    await fn();
    console.log(JSON.stringify({ what, cpu: meter.since() }));
  };
  await span("idle 10 s", () => sleep(10_000));
  await span(`${polls} polls of the completed backup, every ${POLL_MS} ms`, async () => {
    for (let i = 0; i < polls; i++) {
      await api.call("GET", `/api/backups/${b.id}`);
      await sleep(POLL_MS);
    }
  });
  await span("idle 10 s", () => sleep(10_000));
} finally {
  await stack.stop();
  rmSync(dir, { recursive: true, force: true });
}
