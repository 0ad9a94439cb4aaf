// Where a file-level lazy restore's time goes (issue 24's "request → usable ≤ 0.1 s"): the npm workspace backed up
// as files-cas on a private stack of this checkout, then RUNS files-overlay-restores into fresh sandboxes, each
// run's usable time, steps, the gaps between them and the parts of the transfer and materialize steps printed.
// SLEEP=1: each woken tree then gets 10 MB of new files and sleeps as files-cas (a layer of the woken snapshot's
// index: files.ts wakeBase), the next run waking that; the sleep's steps and transfer parts printed.
// Emulator figures. KEEP=1 keeps the state directory (logs/ included). Usage: [SLEEP=1] node scripts/experiments/files-wake.ts [RUNS]
import { execSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ensureNpmWorkspace } from "../bench/peers/npm-workspace.ts";
import { apiClient } from "../cli/api-client.ts";
import { freePort, startStack } from "../stack/stack.ts";

const runs = Number(process.argv[2] ?? 5);
const log = (l: string) => console.error(l);
const workspace = await ensureNpmWorkspace(log);
const state = mkdtempSync(join(tmpdir(), "snapflow-files-wake-"));
const stack = await startStack({ port: await freePort(), privateDir: state, log, startupTriggers: false });
try {
  const api = apiClient(stack.apiUrl, stack.apiToken);
  const ws = join(state, "sandboxes", "src", "workspace");
  mkdirSync(ws, { recursive: true });
  execSync(`cp -a --reflink=never ${JSON.stringify(workspace + "/.")} ${JSON.stringify(ws + "/")}`);
  const b = await api.startBackup({ sandboxId: "src", path: "/workspace", strategy: "files-cas" });
  const base = await api.waitFor("backup", b.id, () => {});
  if (base.status !== "complete") throw new Error(`backup ${b.id} ${base.status}: ${base.error}`);
  const pick = (o: unknown, keys: string[]) => Object.fromEntries(keys.filter((k) => (o as Record<string, unknown>)?.[k] !== undefined).map((k) => [k, (o as Record<string, unknown>)[k]]));
  let latest = base.snapshotId!;
  for (let run = 1; run <= runs; run++) {
    const started = Date.now();
    const r = await api.startRestore({ snapshotId: latest, sandboxId: `wake-${run}`, path: "/workspace", strategy: "files-overlay-restore" });
    const posted = Date.now() - started;
    const s = await api.waitFor("restore", r.id, () => {});
    if (s.status !== "complete") throw new Error(`restore ${r.id} ${s.status}: ${s.error}`);
    const steps = s.steps as Record<string, Record<string, unknown>>;
    log(`run ${run}: POST answered in ${posted} ms; steps ${JSON.stringify(Object.fromEntries(Object.entries(steps).map(([k, v]) => [k, v.ms])))}`);
    const timed = Object.entries(steps).map(([k, v]) => [k, v as { startedAt?: number; endedAt?: number }] as const).filter(([, v]) => v.startedAt && v.endedAt).sort((a, b) => a[1].startedAt! - b[1].startedAt!);
    log(`  request → first step ${timed[0] ? timed[0][1].startedAt! - started : "?"} ms; between steps: ${timed.slice(1).map(([k, v], i) => `${k} +${v.startedAt! - timed[i]![1].endedAt!} ms`).join(", ")}`);
    log(`  probe ${JSON.stringify(pick(steps.probe, ["ms", "probeParts"]))} transfer ${JSON.stringify(pick(steps.transfer, ["ms", "baseMountMs", "baseReadyMs", "baseDoneMs", "swapMs", "mountAtMs", "usableMs"]))} materialize ${JSON.stringify(pick(steps.materialize, ["ms", "clearMs", "swapMs", "mountAtMs", "usableAfterMaterializeMs"]))}`);
    if (process.env.SLEEP !== "1") continue;
    const dir = join(state, "sandboxes", `wake-${run}`, "workspace", `change-${run}`);
    mkdirSync(dir);
    for (let i = 0; i < 8; i++) writeFileSync(join(dir, `f${i}.bin`), randomBytes(1_250_000));
    execSync("sync");
    const sleepStarted = Date.now();
    const b = await api.startBackup({ sandboxId: `wake-${run}`, path: "/workspace", strategy: "files-cas", ...(process.env.PART_MIB ? { tuning: { partSizeMiB: Number(process.env.PART_MIB) } } : {}) });
    const sleepPosted = Date.now() - sleepStarted;
    const slept = await api.waitFor("backup", b.id, () => {});
    const sleepSeen = Date.now() - sleepStarted;
    if (slept.status !== "complete") throw new Error(`backup ${b.id} ${slept.status}: ${slept.error}`);
    latest = slept.snapshotId!;
    // as the sleep-wake bench does: a slept sandbox ends (its helper and overlay would otherwise load the next runs)
    await api.call("DELETE", `/api/sandboxes/wake-${run}/mounts?path=${encodeURIComponent("/workspace")}`);
    await api.destroySandbox(`wake-${run}`);
    const t = slept.steps.transfer as Record<string, unknown>;
    const st = Object.entries(slept.steps).map(([k, v]) => [k, v as { startedAt?: number; endedAt?: number }] as const).filter(([, v]) => v.startedAt && v.endedAt).sort((a, b) => a[1].startedAt! - b[1].startedAt!);
    log(`  sleep: seen ${sleepSeen} ms, POST answered in ${sleepPosted} ms, request → first step ${st[0] ? st[0][1].startedAt! - sleepStarted : "?"} ms; between steps: ${st.slice(1).map(([k, v], i) => `${k} +${v.startedAt! - st[i]![1].endedAt!} ms`).join(", ")}; record's end → seen ${st.length ? sleepStarted + sleepSeen - st.at(-1)![1].endedAt! : "?"} ms`);
    if (process.env.FULL === "1") log(`  sleep transfer: ${JSON.stringify(t)}`);
    log(`  sleep: steps ${JSON.stringify(Object.fromEntries(Object.entries(slept.steps).map(([k, v]) => [k, v.ms])))}; transfer ${JSON.stringify({ ...pick(t, ["ms", "parentMs", "engineMs", "walkMs", "engineAt", "overWake"]), files: pick(t.files, ["newBytes", "read", "reused"]), manifest: pick(t.manifest, ["storeMs"]) })}`);
  }
} finally {
  await stack.stop();
  // A copy of the workspace and a store (~1-2 GB) per run: kept only when asked (its logs/ show each part's side).
  if (process.env.KEEP === "1") log(`state kept in ${state}`);
  else rmSync(state, { recursive: true, force: true });
}
