// Does first use after a wake grow with the lineage (issue 24's "first use, cycle 100 ÷ cycle 1 ≤ 1.2"), or with
// the stack's and the machine's state after many cycles? The npm workspace backed up as files-cas on a private stack
// of this checkout, then CYCLES wake → 10 MB of new files → sleep cycles as the sleep-wake bench makes them (each
// wake waited to its end: every chunk fetched, as the bench's `complete`), first use timed at each; then ROUNDS
// rounds waking cycle 1's snapshot and the last one's alternately, each in a fresh sandbox, first use timed. If the
// old snapshot's first use is as slow as the new one's now, the growth is the state's, not the chain's.
// Emulator figures. Usage: [CYCLES=100] [ROUNDS=4] node scripts/experiments/first-use-lineage.ts
import { execSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { measureFirstUse } from "../bench/forks/first-use.ts";
import { ensureNpmWorkspace } from "../bench/peers/npm-workspace.ts";
import { snapflowRuns } from "../bench/peers/snapflow-runs.ts";
import { apiClient } from "../cli/api-client.ts";
import { freePort, startStack } from "../stack/stack.ts";

const cycles = Number(process.env.CYCLES ?? 100);
const rounds = Number(process.env.ROUNDS ?? 4);
const log = (l: string) => console.error(l);
const workspace = await ensureNpmWorkspace(log);
const state = mkdtempSync(join(tmpdir(), "snapflow-first-use-"));
const stack = await startStack({ port: await freePort(), privateDir: state, log, startupTriggers: false });
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const machine = () => `load ${loadavg().map((x) => x.toFixed(1)).join(" ")}; helpers ${execSync("pgrep -c snapflow-lazy || true").toString().trim()}; fuse mounts ${execSync("grep -c fuse /proc/mounts || true").toString().trim()}`;
try {
  const api = apiClient(stack.apiUrl, stack.apiToken);
  const snap = snapflowRuns(api);
  const ws = join(state, "sandboxes", "src", "workspace");
  mkdirSync(ws, { recursive: true });
  execSync(`cp -a --reflink=never ${JSON.stringify(workspace + "/.")} ${JSON.stringify(ws + "/")}`);
  const b = await api.startBackup({ sandboxId: "src", path: "/workspace", strategy: "files-cas" });
  const base = await api.waitFor("backup", b.id, () => {});
  if (base.status !== "complete") throw new Error(`backup ${b.id} ${base.status}: ${base.error}`);
  await api.destroySandbox("src");
  const wake = async (snapshotId: string, sandboxId: string) => {
    execSync("sync");
    return measureFirstUse(api, { snapshotId, sandboxId, sandboxDir: join(state, "sandboxes", sandboxId), strategy: "files-overlay-restore", marker: "node_modules/typescript/package.json", command: `node -e "require('typescript')"` });
  };
  const snapshots = [base.snapshotId!];
  const firstUse: number[] = [];
  for (let k = 1; k <= cycles; k++) {
    const sandbox = `w-${k}`;
    const woke = await wake(snapshots.at(-1)!, sandbox);
    firstUse.push(woke.commandMs);
    const dir = join(state, "sandboxes", sandbox, "workspace", `change-${k}`);
    mkdirSync(dir);
    for (let i = 0; i < 8; i++) writeFileSync(join(dir, `f${i}.bin`), randomBytes(1_250_000));
    execSync("sync");
    const s = await api.startBackup({ sandboxId: sandbox, path: "/workspace", strategy: "files-cas" });
    const slept = await api.waitFor("backup", s.id, () => {});
    if (slept.status !== "complete") throw new Error(`sleep ${s.id} ${slept.status}: ${slept.error}`);
    snapshots.push(slept.snapshotId!);
    await snap.dispose(sandbox, true);
    if (k === 1 || k % 10 === 0) log(`cycle ${k}: usable ${woke.usableSeenMs} ms, first use ${woke.commandMs} ms, complete ${woke.completeMs} ms; ${machine()}`);
  }
  log(`first use by cycle, medians of ten: ${Array.from({ length: Math.ceil(cycles / 10) }, (_, i) => median(firstUse.slice(i * 10, i * 10 + 10))).join(", ")} ms`);
  // snapshots[1] is what cycle 1 slept (woken at cycle 2); the last is what the last cycle slept.
  const pair = { early: snapshots[1]!, late: snapshots.at(-1)! };
  const seen: Record<"early" | "late", number[]> = { early: [], late: [] };
  const usable: Record<"early" | "late", number[]> = { early: [], late: [] };
  for (let r = 1; r <= rounds; r++) {
    for (const which of (r % 2 ? ["early", "late"] : ["late", "early"]) as ("early" | "late")[]) {
      const sandbox = `ab-${r}-${which}`;
      const woke = await wake(pair[which], sandbox);
      seen[which].push(woke.commandMs);
      usable[which].push(woke.usableSeenMs);
      await snap.dispose(sandbox, true);
    }
    log(`round ${r}: early ${seen.early.at(-1)} ms, late ${seen.late.at(-1)} ms; ${machine()}`);
  }
  log(`alternated: first use early ${seen.early.join("/")} (median ${median(seen.early)}), late ${seen.late.join("/")} (median ${median(seen.late)}) ms; usable early ${median(usable.early)}, late ${median(usable.late)} ms`);
} finally {
  await stack.stop();
  if (process.env.KEEP === "1") log(`state kept in ${state}`);
  else rmSync(state, { recursive: true, force: true });
}
