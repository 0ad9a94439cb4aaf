// What local Workflows' own controls do to instances a killed `wrangler dev` left "running": two backups SIGKILLed
// mid-transfer, the stack started again WITHOUT the watchdog, 20 s of watching (do they move by themselves?), then
// restart() on one (from the beginning: are completed steps replayed?) and terminate() on the other, through the
// `wrangler workflows instances … --local` CLI (the same engine calls as the binding). Prints what it sees.
// Usage: node scripts/experiments/engine-after-restart.ts
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { apiClient } from "../cli/api-client.ts";
import { freePort, PROJECT, startStack, toolEnv } from "../stack/stack.ts";

const dir = mkdtempSync(join(tmpdir(), "snapflow-engine-exp-"));
const port = await freePort();
const t0 = Date.now();
const log = (l: string) => console.error(`[+${((Date.now() - t0) / 1000).toFixed(1)} s] ${l}`);
let stack = await startStack({ port, privateDir: dir, log: () => {} });
const cli = (...args: string[]) => execFileSync(join(PROJECT, "node_modules/.bin/wrangler"), ["workflows", "instances", ...args, "--local", "--port", String(port)], { env: toolEnv(), encoding: "utf8" }).split("\n").filter((l) => /successfully|Status|Error/i.test(l)).join(" ").trim();
try {
  let api = apiClient(stack.apiUrl, stack.apiToken);
  const ids: string[] = [];
  for (const sb of ["a", "b"]) {
    await api.generateDataset(sb, { path: "/workspace/app", kind: "added-data", files: 500, bytes: 5_000_000, addedBytes: 250_000_000 });
  }
  for (const sb of ["a", "b"]) ids.push((await api.startBackup({ sandboxId: sb, path: "/workspace/app", strategy: "tar-zst-pipe" })).id);
  for (;;) {
    const s = await Promise.all(ids.map((id) => api.backup(id)));
    if (s.every((x) => x.steps.archive)) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  await new Promise((r) => setTimeout(r, 800));
  await stack.kill();
  log("killed mid-transfer");
  stack = await startStack({ port, privateDir: dir, log: () => {}, startupTriggers: false });
  const up = Date.now();
  log("up again (no watchdog)");
  api = apiClient(stack.apiUrl, stack.apiToken);
  const show = async () => {
    for (const id of ids) {
      const s = await api.backup(id);
      const t = s.steps.transfer as { startedAt?: number } | undefined;
      log(`  ${id}: ${s.status} steps=${Object.keys(s.steps).join(",")}${t?.startedAt ? ` transfer began +${((t.startedAt - up) / 1000).toFixed(1)} s after up` : ""}${s.steps.probe ? ` probe began +${((Number((s.steps.probe as { startedAt?: number }).startedAt) - up) / 1000).toFixed(1)} s` : ""}`);
    }
  };
  await new Promise((r) => setTimeout(r, 20_000));
  log("after 20 s without the watchdog:");
  await show();
  log(`restart ${ids[0]}: ${cli("restart", "snapflow-backup", ids[0]!)}`);
  log(`terminate ${ids[1]}: ${cli("terminate", "snapflow-backup", ids[1]!)}`);
  for (let i = 0; i < 8; i++) {
    await new Promise((r) => setTimeout(r, 5000));
    log(`+${((Date.now() - up) / 1000).toFixed(0)} s after up:`);
    await show();
  }
} finally {
  await stack.stop();
  rmSync(dir, { recursive: true, force: true });
}
