// Where a file-level incremental's time goes (issue 24's "≤ 0.6 s after a 10 MB change"): the npm workspace backed up
// as files-cas on a private stack of this checkout, then RUNS times 10 MB of new files written and files-cas again
// (its parent the previous one), each run's steps and the transfer step's parts printed. Emulator figures.
// ELSEWHERE=1: the runs are in another sandbox the base was restored into (files-extract), as the race's "not a fork".
// KEEP=1 keeps the state directory. Usage: [ELSEWHERE=1] node scripts/experiments/files-incremental.ts [RUNS]
import { execSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ensureNpmWorkspace } from "../bench/peers/npm-workspace.ts";
import { apiClient } from "../cli/api-client.ts";
import { freePort, startStack } from "../stack/stack.ts";

const runs = Number(process.argv[2] ?? 3);
const log = (l: string) => console.error(l);
const workspace = await ensureNpmWorkspace(log);
const state = mkdtempSync(join(tmpdir(), "snapflow-files-incremental-"));
const stack = await startStack({ port: await freePort(), privateDir: state, log, startupTriggers: false });
try {
  const api = apiClient(stack.apiUrl, stack.apiToken);
  const ws = join(state, "sandboxes", "inc", "workspace");
  mkdirSync(ws, { recursive: true });
  execSync(`cp -a --reflink=never ${JSON.stringify(workspace + "/.")} ${JSON.stringify(ws + "/")}`);
  let started = 0;
  let sandboxId = "inc";
  let tree = ws;
  const backup = async () => {
    started = Date.now();
    const b = await api.startBackup({ sandboxId, path: "/workspace", strategy: "files-cas" });
    const s = await api.waitFor("backup", b.id, () => {});
    if (s.status !== "complete") throw new Error(`backup ${b.id} ${s.status}: ${s.error}`);
    return s;
  };
  const base = await backup();
  if (process.env.ELSEWHERE === "1") {
    sandboxId = "dst";
    tree = join(state, "sandboxes", "dst", "workspace");
    const r = await api.startRestore({ snapshotId: base.snapshotId, sandboxId, path: "/workspace", strategy: "files-extract", replace: true });
    const done = await api.waitFor("restore", r.id, () => {});
    if (done.status !== "complete") throw new Error(`restore ${r.id} ${done.status}: ${done.error}`);
  }
  for (let run = 1; run <= runs; run++) {
    const dir = join(tree, `change-${run}`);
    mkdirSync(dir);
    for (let i = 0; i < 8; i++) writeFileSync(join(dir, `f${i}.bin`), randomBytes(1_250_000));
    execSync("sync");
    const s = await backup();
    const t = s.steps.transfer as Record<string, unknown>;
    const pick = (o: unknown, keys: string[]) => Object.fromEntries(keys.filter((k) => (o as Record<string, unknown>)?.[k] !== undefined).map((k) => [k, (o as Record<string, unknown>)[k]]));
    log(`run ${run}: total ${s.totalMs} ms; steps ${JSON.stringify(Object.fromEntries(Object.entries(s.steps).map(([k, v]) => [k, v.ms])))}`);
    // The Workflow's time between steps: each step's start after the one before ended (the stack's clock).
    const timed = Object.entries(s.steps).map(([k, v]) => [k, v as { startedAt?: number; endedAt?: number }] as const).filter(([, v]) => v.startedAt && v.endedAt).sort((a, b) => a[1].startedAt! - b[1].startedAt!);
    log(`  between steps: ${timed.slice(1).map(([k, v], i) => `${k} +${v.startedAt! - timed[i]![1].endedAt!} ms`).join(", ")}; request → first step ${timed[0] ? timed[0][1].startedAt! - started : "?"} ms, last step → seen ${timed.length ? Date.now() - timed[timed.length - 1]![1].endedAt! : "?"} ms`);
    log(`  transfer: ${JSON.stringify({ ...pick(t, ["ms", "parentMs", "engineMs", "walkMs", "parts", "urls", "attempts", "sizeBy", "bytes"]), files: pick(t.files, ["newBytes", "read", "chain"]), manifest: pick(t.manifest, ["ms", "storeMs", "manifestBytes"]) })}`);
  }
} finally {
  await stack.stop();
  // A copy of the workspace and a store (~1-2 GB) per run: kept only when asked (its logs/ show each part's side).
  if (process.env.KEEP === "1") log(`state kept in ${state}`);
  else rmSync(state, { recursive: true, force: true });
}
