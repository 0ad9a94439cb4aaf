// `npx snapflow bench --preset forks`: issue 10's figures, on a private local stack (as the peers race).
//
// Per dataset (the npm workspace; the seed-003 shape with 5 GB added), on one tree:
//   parent     a squashfs-chunked backup into an empty chunk store (what it uploads: the whole image), and the
//              default backup (tar-zst-pipe) for the size a full archive has
//   mount      squashfs-zstd-3 → presigned-squashfs-mount: the download-then-mount restore a lazy one must beat
//   first use  lazy-squashfs restore of the parent: when the tree answers at the target, a first-use command's
//              time, the bytes local then (and which the reads asked for), and when every chunk is local
//   forks      N times: the parent opened writable (lazy-overlay-restore) in a fresh sandbox, a seeded 10 MB change
//              written into it, an overlay-delta backup of the fork (its upper directory only): bytes uploaded and
//              wall time. The first fork is also backed up whole (squashfs-chunked), for comparison, and its
//              delta restored into a fresh sandbox (lazy-overlay-restore: usable, complete).
//   stored     the chunk store and the forks' delta archives after the parent and the forks, against N + 1 full
//              archives (manifests apart: every snapshot has one)
// Each operation after a `sync`. Results: results/<date>-<name>.{json,md}.
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { join } from "node:path";
import { apiClient } from "../../cli/api-client.ts";
import { machineDescription } from "../matrix-bench.ts";
import { removePrivateStackData } from "../../stack/private-stack-data.ts";
import { applyChange } from "../peers/change.ts";
import { ensureNpmWorkspace } from "../peers/npm-workspace.ts";
import { peerStore, storedBytes } from "../peers/peer-store.ts";
import { q, requireTools, sh } from "../peers/shell.ts";
import { CHUNKED_BACKUP, DEFAULT_BACKUP, LAZY_RESTORE, MOUNT_BACKUP, MOUNT_RESTORE, snapflowRuns, type SnapflowRun } from "../peers/snapflow-runs.ts";
import { BUCKET, freePort, PROJECT, startStack, STATE, type Stack } from "../../stack/stack.ts";
import { measureFirstUse, toUsable, type FirstUse } from "./first-use.ts";
import { forksMarkdown, type ForksDataset, type ForksResults } from "./forks-report.ts";
import { currentResultsStem } from "../results-files.ts";
import { usableStep } from "../../../src/restore/usable-step.ts";

export type ForksDatasetName = "npm-workspace" | "added-data";

export interface ForksOptions {
  datasets: ForksDatasetName[];
  forks: number;
  changeBytes: number;
  /** added-data: incompressible bytes on top of a node-modules base */
  addedBytes: number;
  name: string;
  out: string;
}

export const FORKS_DEFAULTS: ForksOptions = { datasets: ["npm-workspace", "added-data"], forks: 10, changeBytes: 10_000_000, addedBytes: 5_000_000_000, name: "forks", out: join(PROJECT, "results") };

/** What first use means per dataset: a file whose presence says the tree answers, and the command. */
const FIRST_USE: Record<ForksDatasetName, { marker: string; command: string }> = {
  "npm-workspace": { marker: "node_modules/typescript/package.json", command: `node -e "require('typescript')"` },
  // sed, not head: head would close the pipe early, and find's SIGPIPE fails the pipeline (pipefail).
  "added-data": { marker: "package.json", command: "find node_modules -maxdepth 3 -name package.json | sed -n 1,50p | xargs cat > /dev/null" },
};

/** A fork: the parent opened writable over its lazily mounted image, then backed up as its overlay's changes. */
const FORK_RESTORE = "lazy-overlay-restore";
const FORK_BACKUP = "overlay-delta";
const chunksOf = (r: SnapflowRun) => r.raw.transfer?.chunks as { imageBytes: number; uploadedBytes: number; distinct: number; uploadedChunks: number };

export async function runForks(o: ForksOptions, log: (line: string) => void = (l) => console.error(l)): Promise<number> {
  await requireTools(["rclone", "sync", "node", ...(o.datasets.includes("npm-workspace") ? ["npm", "git"] : [])]);
  const stackDir = join(STATE, "forks", "stack");
  rmSync(stackDir, { recursive: true, force: true });
  const npmWorkspace = o.datasets.includes("npm-workspace") ? await ensureNpmWorkspace(log) : undefined;
  let stack: Stack | undefined;
  const stop = async () => {
    await stack?.stop();
    stack = undefined;
    await removePrivateStackData(stackDir, (l) => log(`forks: ${l}`));
  };
  const errors: string[] = [];
  try {
    stack = await startStack({ port: await freePort(), privateDir: stackDir, log });
    const api = apiClient(stack.apiUrl, stack.apiToken);
    const snap = snapflowRuns(api);
    const store = peerStore(stackDir, stack.s3Endpoint, BUCKET);
    const storedBelow = (prefix: string) => storedBytes(store, prefix);
    const sandboxDir = (id: string) => join(stackDir, "sandboxes", id);
    const results: ForksResults = { name: o.name, date: new Date().toISOString().slice(0, 10), machine: machineDescription(stack.apiUrl), forks: o.forks, changeBytes: o.changeBytes, datasets: [], errors, load: { start: loadavg(), end: [], cores: cpus().length } };

    for (const name of o.datasets) {
      const source = `forks-${name}`;
      const dir = join(sandboxDir(source), "workspace");
      if (name === "npm-workspace") {
        mkdirSync(dir, { recursive: true });
        await sh(`cp -a --reflink=never ${q(npmWorkspace! + "/.")} ${q(dir + "/")}`);
      } else {
        await api.generateDataset(source, { path: "/workspace", kind: "added-data", seed: 1, files: 10_000, bytes: 190_000_000, addedBytes: o.addedBytes });
      }
      const [entries, bytes] = (await sh(`find . | wc -l; du -sb . | cut -f1`, { cwd: dir })).stdout.trim().split("\n").map(Number);
      log(`forks: ${name}: ${(bytes! / 1e6).toFixed(0)} MB, ${entries} entries`);
      const step = async <T>(what: string, fn: () => Promise<T>): Promise<T | undefined> => {
        await sh("sync");
        try {
          return await fn();
        } catch (e) {
          errors.push(`${name}: ${what}: ${(e as Error).message}`);
          log(`forks: ${name}: ${what} FAILED: ${(e as Error).message}`);
          return undefined;
        }
      };
      const d: ForksDataset = { name, bytes: bytes!, entries: entries!, firstUse: FIRST_USE[name], forks: [] };
      results.datasets.push(d);

      const full = await step("default backup", () => snap.backup(source, DEFAULT_BACKUP));
      if (full) d.fullArchiveBytes = full.raw.transfer?.bytes;
      const image = await step("image backup", () => snap.backup(source, MOUNT_BACKUP));
      if (image) {
        const mounted = await step("mount restore", () => snap.restore(image.snapshotId!, `${source}-mount`, MOUNT_RESTORE));
        if (mounted) d.mountRestoreMs = mounted.wallMs;
        await snap.dispose(`${source}-mount`, mounted !== undefined).catch(() => {});
        await api.call("DELETE", `/api/snapshots/${image.snapshotId}`).catch(() => {});
      }
      const parent = await step("chunked backup", () => snap.backup(source, CHUNKED_BACKUP));
      if (!parent) continue;
      d.parent = { ms: parent.wallMs, ...chunksOf(parent) };
      log(`forks: ${name}: parent ${(parent.wallMs / 1000).toFixed(2)} s, image ${(d.parent.imageBytes / 1e6).toFixed(1)} MB`);

      const lazy = `${source}-first-use`;
      const first: FirstUse | undefined = await step("first use", () => measureFirstUse(api, { snapshotId: parent.snapshotId!, sandboxId: lazy, sandboxDir: sandboxDir(lazy), strategy: LAZY_RESTORE, ...FIRST_USE[name] }));
      if (first) {
        d.firstUseRun = first;
        log(`forks: ${name}: usable ${(first.usableSeenMs / 1000).toFixed(2)} s, first use done ${(first.firstUseDoneMs / 1000).toFixed(2)} s with ${(first.atFirstUse.localBytes / 1e6).toFixed(1)} MB local (${(first.atFirstUse.onDemandBytes / 1e6).toFixed(1)} MB on demand), complete ${(first.completeMs / 1000).toFixed(2)} s`);
      }
      await snap.dispose(lazy, first !== undefined).catch(() => {});

      for (let i = 1; i <= o.forks; i++) {
        const fork = `${source}-fork-${i}`;
        const opened = await step(`fork ${i}: restore`, () => snap.restore(parent.snapshotId!, fork, FORK_RESTORE));
        if (!opened) continue;
        const change = await step(`fork ${i}: change`, () => applyChange(join(sandboxDir(fork), "workspace"), 100 + i, o.changeBytes));
        const child = change ? await step(`fork ${i}: backup`, () => snap.backup(fork, FORK_BACKUP, parent.snapshotId!)) : undefined;
        if (child) {
          const uploadedBytes = child.raw.transfer?.bytes ?? 0;
          d.forks.push({ ms: child.wallMs, steps: child.steps, restoreMs: opened.wallMs, usableMs: usableStep(opened.raw)?.usableMs as number | undefined, toUsable: toUsable(opened.raw), uploadedBytes, snapshotId: child.snapshotId! });
          log(`forks: ${name}: fork ${i}: opened ${(opened.wallMs / 1000).toFixed(2)} s; backup ${(child.wallMs / 1000).toFixed(2)} s, uploaded ${(uploadedBytes / 1e6).toFixed(1)} MB`);
        }
        if (i === 1 && child) {
          // The same fork backed up whole, as before overlay deltas: the image rebuilt, only new chunks uploaded.
          const whole = await step("fork 1: whole chunked backup", () => snap.backup(fork, CHUNKED_BACKUP));
          if (whole) d.wholeFork = { ms: whole.wallMs, steps: whole.steps, ...chunksOf(whole) };
          // Gone again, with the chunks only it uploaded, so that the store's size below counts the forks' deltas.
          if (whole) await api.call("DELETE", `/api/snapshots/${whole.snapshotId}`).then(() => api.call("POST", "/api/chunks/gc", { graceSeconds: 0 })).catch(() => {});
        }
        await snap.dispose(fork, true).catch(() => {});
        if (i === 1 && child) {
          const back = `${source}-fork-1-restored`;
          const restored = await step("fork 1: restore of its delta", () => snap.restore(child.snapshotId!, back, FORK_RESTORE));
          if (restored) d.forkRestore = { ms: restored.wallMs, usableMs: usableStep(restored.raw)?.usableMs as number | undefined, completeMs: restored.raw.verify?.completeMs as number | undefined, toUsable: toUsable(restored.raw) };
          await snap.dispose(back, restored !== undefined).catch(() => {});
        }
      }
      // A delta's archive is what its backup uploaded (the default backup's archive sits under snapshots/ too).
      d.storedDeltaBytes = d.forks.reduce((n, f) => n + f.uploadedBytes, 0);
      d.storedChunkBytes = await storedBelow("chunks/").catch((e: Error) => (errors.push(`${name}: sizing the chunk store: ${e.message}`), undefined));
      // The next dataset starts from an empty chunk store again.
      for (const id of [parent.snapshotId!]) await api.call("DELETE", `/api/snapshots/${id}?cascade=true`).catch(() => {});
      const listed = await api.call<{ snapshots: { id: string }[] }>("GET", "/api/snapshots?limit=1000").catch(() => ({ snapshots: [] }));
      for (const s of listed.snapshots) await api.call("DELETE", `/api/snapshots/${s.id}?cascade=true`).catch(() => {});
      await api.call("POST", "/api/chunks/gc", { graceSeconds: 0 }).catch(() => {});
      await api.destroySandbox(source).catch(() => {});
    }
    results.load!.end = loadavg();
    const stem = currentResultsStem(o.out, o.name);
    writeFileSync(`${stem}.json`, JSON.stringify(results, null, 1) + "\n");
    writeFileSync(`${stem}.md`, forksMarkdown(results));
    console.log(forksMarkdown(results));
    log(`forks: wrote ${stem}.{json,md}`);
    return errors.length ? 1 : 0;
  } finally {
    await stop();
  }
}
