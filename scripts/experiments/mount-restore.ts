// Where a mount restore's time goes (issue 23's "mount restore, complete and verified ≤ 0.5 s"): the npm workspace
// backed up as squashfs-zstd-3 on a private stack of this checkout, then RUNS presigned-squashfs-mount restores into
// fresh sandboxes, each run's wall (POST → the run's end as its record says), steps, the gaps between them and the
// transfer's and materialize's parts printed. BACKUP= and STRATEGY= pick another pair (a lazy restore:
// BACKUP=squashfs-chunked STRATEGY=lazy-squashfs). Emulator figures. KEEP=1 keeps the state directory. Usage: node scripts/experiments/mount-restore.ts [RUNS]
import { execSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ensureNpmWorkspace } from "../bench/peers/npm-workspace.ts";
import { apiClient } from "../cli/api-client.ts";
import { freePort, startStack } from "../stack/stack.ts";

const runs = Number(process.argv[2] ?? 5);
const strategy = process.env.STRATEGY ?? "presigned-squashfs-mount";
const log = (l: string) => console.error(l);
const workspace = await ensureNpmWorkspace(log);
const state = mkdtempSync(join(tmpdir(), "snapflow-mount-restore-"));
const stack = await startStack({ port: await freePort(), privateDir: state, log, startupTriggers: false });
try {
  const api = apiClient(stack.apiUrl, stack.apiToken);
  const ws = join(state, "sandboxes", "src", "workspace");
  mkdirSync(ws, { recursive: true });
  execSync(`cp -a --reflink=never ${JSON.stringify(workspace + "/.")} ${JSON.stringify(ws + "/")}`);
  const b = await api.startBackup({ sandboxId: "src", path: "/workspace", strategy: process.env.BACKUP ?? "squashfs-zstd-3" });
  const base = await api.waitFor("backup", b.id, () => {});
  if (base.status !== "complete") throw new Error(`backup ${b.id} ${base.status}: ${base.error}`);
  const omit = new Set(["startedAt", "endedAt", "snapshot", "layers", "space", "swap", "verified", "sha256"]);
  const brief = (o: Record<string, unknown>) => Object.fromEntries(Object.entries(o).filter(([k]) => !omit.has(k)));
  for (let run = 1; run <= runs; run++) {
    const started = Date.now();
    const r = await api.startRestore({ snapshotId: base.snapshotId!, sandboxId: `restore-${run}`, path: "/workspace", strategy });
    const s = await api.waitFor("restore", r.id, () => {});
    if (s.status !== "complete") throw new Error(`restore ${r.id} ${s.status}: ${s.error}`);
    const steps = s.steps as Record<string, Record<string, unknown> & { startedAt?: number; endedAt?: number }>;
    const timed = Object.entries(steps).filter(([, v]) => v.startedAt && v.endedAt).sort((a, b) => a[1].startedAt! - b[1].startedAt!);
    const end = timed.at(-1)![1].endedAt!;
    log(`run ${run}: POST → record's end ${end - started} ms; request → first step ${timed[0]![1].startedAt! - started} ms; gaps ${timed.slice(1).map(([k, v], i) => `${k} +${v.startedAt! - timed[i]![1].endedAt!}`).join(", ")}`);
    for (const [k, v] of timed) log(`  ${k} ${JSON.stringify(brief(v))}`);
  }
} finally {
  await stack.stop();
  // A copy of the workspace and a store (~1-2 GB) per run: kept only when asked (its logs/ show each part's side).
  if (process.env.KEEP === "1") log(`state kept in ${state}`);
  else rmSync(state, { recursive: true, force: true });
}
