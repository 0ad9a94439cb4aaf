// pause() then resume() on a LIVE instance (mid-transfer, nothing killed) under wrangler dev: does it continue?
// (In the vitest workers pool the same calls abort the step — "Aborting engine: User called pause" — and leave the
// instance "queued" for good.) Prints the run's status once a second for 40 s after the resume.
// Usage: [WAIT_PAUSED=1] node scripts/experiments/pause-live-run.ts
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { apiClient } from "../cli/api-client.ts";
import { freePort, PROJECT, startStack, toolEnv } from "../stack/stack.ts";

const dir = mkdtempSync(join(tmpdir(), "snapflow-pause-exp-"));
const port = await freePort();
const t0 = Date.now();
const log = (l: string) => console.error(`[+${((Date.now() - t0) / 1000).toFixed(1)} s] ${l}`);
const stack = await startStack({ port, privateDir: dir, log: () => {} });
const cli = (...args: string[]) => execFileSync(join(PROJECT, "node_modules/.bin/wrangler"), ["workflows", "instances", ...args, "--local", "--port", String(port)], { env: toolEnv(), encoding: "utf8" }).split("\n").filter((l) => /successfully|Error/i.test(l)).join(" ").trim();
try {
  const api = apiClient(stack.apiUrl, stack.apiToken);
  await api.generateDataset("a", { path: "/workspace/app", kind: "added-data", files: 500, bytes: 5_000_000, addedBytes: 250_000_000 });
  const { id } = await api.startBackup({ sandboxId: "a", path: "/workspace/app", strategy: "tar-zst-pipe" });
  while (!(await api.backup(id)).steps.archive) await new Promise((r) => setTimeout(r, 50));
  await new Promise((r) => setTimeout(r, 800));
  log(`pause: ${cli("pause", "snapflow-backup", id)}; status ${(await api.backup(id)).status}`);
  // WAIT_PAUSED=1: resume only once it says "paused" (what the watchdog does); else 2 s later, still pausing.
  if (process.env.WAIT_PAUSED === "1") while ((await api.backup(id)).status !== "paused") await new Promise((r) => setTimeout(r, 200));
  else await new Promise((r) => setTimeout(r, 2000));
  log(`before the resume: ${(await api.backup(id)).status}`);
  log(`resume: ${cli("resume", "snapflow-backup", id)}`);
  let last = "";
  for (const end = Date.now() + 40_000; Date.now() < end; await new Promise((r) => setTimeout(r, 1000))) {
    const s = await api.backup(id);
    const line = `${s.status} steps=${Object.keys(s.steps).join(",")} ${s.error ?? ""}`;
    if (line !== last) log(line);
    last = line;
    if (["complete", "errored", "terminated"].includes(s.status)) break;
  }
} finally {
  await stack.stop();
  rmSync(dir, { recursive: true, force: true });
}
