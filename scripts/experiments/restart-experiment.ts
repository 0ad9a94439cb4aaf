// What local Workflows do after `wrangler dev` is killed mid-run and started again: a private stack, a backup
// whose transfer takes a few seconds, SIGKILL of the whole stack during the transfer, the same stack started
// again (same state, port and secrets), then the run's status polled once a second. Prints one line per change.
// Usage: node scripts/experiments/restart-experiment.ts [seconds to watch after the restart, default 90]
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { apiClient, type RunStatus } from "../cli/api-client.ts";
import { freePort, startStack } from "../stack/stack.ts";

const watchS = Number(process.argv[2] ?? 90);
const dir = mkdtempSync(join(tmpdir(), "snapflow-restart-exp-"));
const port = await freePort();
const log = (l: string) => console.error(`[${new Date().toISOString().slice(11, 23)}] ${l}`);
let stack = await startStack({ port, privateDir: dir, log });
try {
  let api = apiClient(stack.apiUrl, stack.apiToken);
  const ds = await api.generateDataset("exp", { path: "/workspace/app", kind: "added-data", files: 2000, bytes: 20_000_000, addedBytes: 400_000_000 });
  log(`dataset: ${JSON.stringify(ds)}`);
  const { id } = await api.startBackup({ sandboxId: "exp", path: "/workspace/app", strategy: process.env.STRATEGY ?? "tar-zst-pipe" });
  log(`backup ${id}`);
  let s: RunStatus;
  for (;;) {
    s = await api.backup(id);
    if (s.steps.archive || s.steps.probe) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  log(`steps done before the kill: ${Object.keys(s.steps).join(",")}; killing in 1.5 s`);
  await new Promise((r) => setTimeout(r, 1500));
  await stack.kill();
  log("killed");
  stack = await startStack({ port, privateDir: dir, log });
  const up = Date.now();
  api = apiClient(stack.apiUrl, stack.apiToken);
  let last = "";
  while (Date.now() - up < watchS * 1000) {
    const now = await api.backup(id).catch((e: Error) => ({ status: `error ${e.message}`, steps: {} }) as unknown as RunStatus);
    const line = `${now.status} steps=${Object.keys(now.steps).join(",")} error=${now.error ?? ""}`;
    if (line !== last) log(`+${((Date.now() - up) / 1000).toFixed(1)} s: ${line}`);
    last = line;
    if (["complete", "errored", "terminated"].includes(now.status)) break;
    await new Promise((r) => setTimeout(r, 1000));
  }
} finally {
  await stack.stop();
  if (!process.env.KEEP) rmSync(dir, { recursive: true, force: true });
  else log(`state kept in ${dir}`);
}
