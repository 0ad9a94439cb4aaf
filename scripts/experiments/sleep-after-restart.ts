// A run asleep in a retry delay (step.do's backoff, a step.sleep underneath) when the stack is SIGKILLed: the agent
// is stopped so the probe fails and the engine waits to retry; the stack is killed in that wait and started again
// (agent back) with or without the watchdog (WATCHDOG=0). Prints the run's status once a second for 40 s.
// Usage: [WATCHDOG=0] node scripts/experiments/sleep-after-restart.ts
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { apiClient } from "../cli/api-client.ts";
import { freePort, startStack } from "../stack/stack.ts";

const dir = mkdtempSync(join(tmpdir(), "snapflow-sleep-exp-"));
const port = await freePort();
const t0 = Date.now();
const log = (l: string) => console.error(`[+${((Date.now() - t0) / 1000).toFixed(1)} s] ${l}`);
let stack = await startStack({ port, privateDir: dir, log: () => {} });
try {
  let api = apiClient(stack.apiUrl, stack.apiToken);
  await api.generateDataset("a", { path: "/workspace/app", kind: "tricky", seed: 1 });
  await stack.parts.agent().stop();
  const { id } = await api.startBackup({ sandboxId: "a", path: "/workspace/app", strategy: "tar-zst-pipe" });
  for (let i = 0; i < 40; i++) {
    const s = await api.backup(id);
    if (s.status === "waiting") break;
    await new Promise((r) => setTimeout(r, 100));
  }
  log(`before the kill: ${(await api.backup(id)).status}`);
  await stack.kill();
  stack = await startStack({ port, privateDir: dir, log: () => {}, startupTriggers: process.env.WATCHDOG !== "0" });
  const up = Date.now();
  log(`up again (watchdog ${process.env.WATCHDOG === "0" ? "off" : "on"})`);
  api = apiClient(stack.apiUrl, stack.apiToken);
  let last = "";
  while (Date.now() - up < 40_000) {
    const s = await api.call<{ status: string; steps: object; interrupted?: string[]; error?: string }>("GET", `/api/backups/${id}`);
    const line = `${s.status} steps=${Object.keys(s.steps).join(",")} ${s.interrupted ?? ""} ${s.error ?? ""}`;
    if (line !== last) log(`+${((Date.now() - up) / 1000).toFixed(1)} s after up: ${line}`);
    last = line;
    if (["complete", "errored", "terminated"].includes(s.status)) break;
    await new Promise((r) => setTimeout(r, 1000));
  }
} finally {
  await stack.stop();
  rmSync(dir, { recursive: true, force: true });
}
