// `npx snapflow bench --preset sleep-wake`: issue 24's cycles, on a private local stack (as the forks race).
//
//   base    the dataset backed up into an empty store: a squashfs-chunked image, or (--base files-cas) file-level
//   cycle   N times: wake the latest snapshot in a fresh sandbox (lazy-overlay-restore, or files-overlay-restore
//           over a file-level base: the chain laid read-only
//           under an empty upper) — request → usable, first use, request → complete —, and at the first and last
//           cycles first use over more wakes of the same snapshot (FIRST_USE_SAMPLES); compare the woken tree with
//           an independent walk of what slept (tree-digest.ts, hashes included); change it (cycle-change.ts);
//           sleep it (overlay-delta over the woken snapshot; or, --sleep files-cas over a file-level base, a layer of
//           the woken snapshot's index holding what the wake's upper holds): wall time, bytes uploaded, the chain's
//           depth; the store's total against the base plus the sum of the changes.
//   compact a sleep whose chain lies --compact-after deltas over its image (or compaction), or whose deltas there
//           hold 8 MiB, starts a background compaction (workflows/compact-workflow.ts), never waited for: each cycle shows the depth a
//           wake resolved to (deltas laid over the image or the newest compaction), and the compactions that ended
//           during it (how long, bytes uploaded: counted in the store, not in the sleep's upload)
//   gc      at the end: the compactions still running awaited, every snapshot the tip does not need deleted, the
//           chunks nothing references collected; the store measured again, and the tip woken once more (exact?)
// Each operation after a `sync`. Exit 1 when a woken tree differs or a step fails.
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { join } from "node:path";
import { MAX_OVERLAY_CHAIN } from "../../../container/contract/protocol.ts";
import { DEFAULT_COMPACT_AFTER } from "../../../src/compaction/compaction-params.ts";
import { collectAllButTip, compactionWatch } from "./compaction-watch.ts";
import { apiClient } from "../../cli/api-client.ts";
import { machineDescription } from "../matrix-bench.ts";
import { removePrivateStackData } from "../../stack/private-stack-data.ts";
import { ensureNpmWorkspace } from "../peers/npm-workspace.ts";
import { peerStore, storedBytes } from "../peers/peer-store.ts";
import { q, requireTools, sh } from "../peers/shell.ts";
import { snapflowRuns } from "../peers/snapflow-runs.ts";
import { BUCKET, freePort, PROJECT, startStack, STATE, type Stack } from "../../stack/stack.ts";
import { measureFirstUse } from "../forks/first-use.ts";
import { currentResultsStem } from "../results-files.ts";
import { applyCycleChange, chooseBase, CYCLE_DIR } from "./cycle-change.ts";
import { sleepWakeMarkdown, type SleepWakeResults } from "./sleep-wake-report.ts";
import { compareDigests, digestTree, type TreeDigest } from "./tree-digest.ts";

export interface SleepWakeOptions {
  dataset: "npm-workspace" | "node-modules";
  cycles: number;
  changeBytes: number;
  /** node-modules: the generated tree's file count (its bytes scale with it) */
  files: number;
  name: string;
  out: string;
  /** compact a chain once a sleep lies this many deltas over its image or compaction (the API's compactAfter) */
  compactAfter: number;
  /** the base's format: a chunked squashfs image (woken with lazy-overlay-restore), or file-level (files-overlay-restore) */
  base: SleepWakeBase;
  /**
   * the sleep's preset: overlay-delta (the Worker relays it in parts), overlay-delta-put (the sandbox PUTs it once),
   * or files-cas (a file-level base only: the sleep is a layer of the woken snapshot's index, no compaction needed)
   */
  sleep: SleepWakeSleep;
}

export const SLEEPS = ["overlay-delta", "overlay-delta-put", "files-cas"] as const;
export type SleepWakeSleep = (typeof SLEEPS)[number];

export type SleepWakeBase = "squashfs-chunked" | "files-cas";
/** The wake that lays a chain over each base. */
const WAKE: Record<SleepWakeBase, string> = { "squashfs-chunked": "lazy-overlay-restore", "files-cas": "files-overlay-restore" };

export const SLEEP_WAKE_DEFAULTS: SleepWakeOptions = { dataset: "npm-workspace", cycles: 100, changeBytes: 10_000_000, files: 5000, name: "sleep-wake-npm-workspace", out: join(PROJECT, "results"), compactAfter: DEFAULT_COMPACT_AFTER, base: "squashfs-chunked", sleep: "overlay-delta" };

/** First use: a file whose presence says the tree answers, and the command run in it. */
const FIRST_USE = {
  "npm-workspace": { marker: "node_modules/typescript/package.json", command: `node -e "require('typescript')"`, keep: ["node_modules/typescript"] },
  // sed, not head: head would close the pipe early, and find's SIGPIPE fails the pipeline (pipefail).
  "node-modules": { marker: "node_modules", command: "find node_modules -maxdepth 3 -name package.json | sed -n 1,50p | xargs cat > /dev/null", keep: [] as string[] },
} as const;

/**
 * Wakes whose first use is measured at cycle 1 and at the last cycle, the cycle's own and more in fresh sandboxes of
 * their own (their trees not compared: the cycle's own is): first use is one cold command, and one sample swung it
 * (2026-11-28, cycle 100: 0.49 s against a median of 0.27 s over the last ten cycles), so the target's ratio is of
 * medians.
 */
const FIRST_USE_SAMPLES = 3;
/** Wakes of each of the two snapshots (cycle 1's, the last cycle's) after the last cycle, alternated. */
const FIRST_USE_ALTERNATED = 5;

/**
 * The bench's own walks of a woken tree (tree-digest.ts) bounded: one of 100 cycles once never settled (2026-11-28,
 * cycle 100: the mount answered reads from a shell, the bench's process sat idle with no I/O pending), and a bench
 * that waits for ever writes no results. A walk of the npm workspace takes a few seconds.
 */
const WALK_DEADLINE_MS = 5 * 60_000;
function bounded<T>(work: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what} did not end within ${WALK_DEADLINE_MS / 60_000} min`)), WALK_DEADLINE_MS)));
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}

export async function runSleepWake(o: SleepWakeOptions, log: (line: string) => void = (l) => console.error(l)): Promise<number> {
  if (o.sleep === "files-cas" && o.base !== "files-cas") throw new Error("--sleep files-cas needs --base files-cas (a layer lies over a file-level index)");
  await requireTools(["rclone", "sync", "node", ...(o.dataset === "npm-workspace" ? ["npm", "git"] : [])]);
  const stackDir = join(STATE, "sleep-wake", "stack");
  rmSync(stackDir, { recursive: true, force: true });
  const npmWorkspace = o.dataset === "npm-workspace" ? await ensureNpmWorkspace(log) : undefined;
  let stack: Stack | undefined;
  const errors: string[] = [];
  // Stopped by a signal: the stack goes with its mounts (the sandboxes' FUSE helpers and overlays), as at the end.
  const onSignal = () => void Promise.resolve(stack?.stop()).then(() => removePrivateStackData(stackDir, (l) => log(`sleep-wake: ${l}`))).finally(() => process.exit(130));
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  try {
    stack = await startStack({ port: await freePort(), privateDir: stackDir, log });
    const api = apiClient(stack.apiUrl, stack.apiToken);
    const snap = snapflowRuns(api);
    const store = peerStore(stackDir, stack.s3Endpoint, BUCKET);
    const storeTotal = () => storedBytes(store);
    const workspace = (id: string) => join(stackDir, "sandboxes", id, "workspace");
    /** A wake of the snapshot into `sandboxId`, first use timed (forks/first-use.ts). */
    const wake = (snapshotId: string, sandboxId: string) => measureFirstUse(api, { snapshotId, sandboxId, sandboxDir: join(stackDir, "sandboxes", sandboxId), strategy: WAKE[o.base], marker: firstUse.marker, command: firstUse.command });
    /** One more first-use sample of the snapshot, in a sandbox of its own that is ended after (its tree not compared). */
    const sampleFirstUse = async (snapshotId: string, sandboxId: string) => {
      try {
        await sh("sync");
        return (await wake(snapshotId, sandboxId)).commandMs;
      } finally {
        await snap.dispose(sandboxId, true).catch(() => api.destroySandbox(sandboxId).catch(() => {}));
      }
    };
    const firstUse = FIRST_USE[o.dataset];

    const source = `sw-${o.dataset}`;
    const dir = workspace(source);
    if (npmWorkspace) {
      mkdirSync(dir, { recursive: true });
      await sh(`cp -a --reflink=never ${q(npmWorkspace + "/.")} ${q(dir + "/")}`);
    } else {
      await api.generateDataset(source, { path: "/workspace", kind: "node-modules", seed: 24, files: o.files, bytes: o.files * 20_000 });
    }
    const [entries, bytes] = (await sh(`find . | wc -l; du -sb . | cut -f1`, { cwd: dir })).stdout.trim().split("\n").map(Number);
    log(`sleep-wake: ${o.dataset}: ${(bytes! / 1e6).toFixed(0)} MB, ${entries} entries; ${o.cycles} cycles of ${(o.changeBytes / 1e6).toFixed(1)} MB`);
    const baseChoices = await chooseBase(dir, [...firstUse.keep, CYCLE_DIR]);
    await sh("sync");
    const base = await snap.backup(source, o.base);
    const baseFiles = base.raw.transfer?.files as { pack?: { bytes: number } } | undefined;
    const baseChunks = (base.raw.transfer?.chunks as { imageBytes: number; uploadedBytes: number } | undefined) ?? { imageBytes: baseFiles?.pack?.bytes ?? 0, uploadedBytes: (baseFiles?.pack?.bytes ?? 0) + (base.raw.transfer?.bytes as number) };
    // The base image's content check (a restore into a sandbox of its own: src/restore/background-check.ts) runs once
    // after its backup; the cycles start after it, not beside it on 2 cores.
    // (A file-level snapshot has no image to check: each chunk is checked against its SHA-256 as it is read.)
    if (o.base === "squashfs-chunked") {
      const checkMs = await snap.contentChecked(base.snapshotId!);
      log(`sleep-wake: the base's content check ended ${(checkMs / 1000).toFixed(2)} s after its backup`);
    }
    const results: SleepWakeResults = {
      name: o.name, baseStrategy: o.base, wake: WAKE[o.base], sleep: o.sleep, date: new Date().toISOString().slice(0, 10), machine: machineDescription(stack.apiUrl), dataset: o.dataset,
      bytes: bytes!, entries: entries!, changeBytes: o.changeBytes, maxDepth: MAX_OVERLAY_CHAIN, compactAfter: o.compactAfter, firstUse: firstUse.command,
      base: { ms: base.wallMs, imageBytes: baseChunks.imageBytes, uploadedBytes: baseChunks.uploadedBytes, storedBytes: await storeTotal() },
      cycles: [], errors, load: { start: loadavg(), end: [], cores: cpus().length },
    };
    log(`sleep-wake: base ${(base.wallMs / 1000).toFixed(2)} s, image ${(baseChunks.imageBytes / 1e6).toFixed(1)} MB`);
    let slept: TreeDigest = (await digestTree(dir)).digest;
    await api.destroySandbox(source).catch(() => {});
    let latest = base.snapshotId!;
    let changed = 0;
    const watch = compactionWatch(api);
    // Every snapshot made, oldest first (the garbage collection at the end keeps what the tip needs).
    const made = [latest];
    const runStarted = performance.now();
    // What each cycle woke (wokenSnapshots[k - 1]: cycle k's), for the alternated first uses after the last cycle.
    const wokenSnapshots: string[] = [];

    for (let k = 1; k <= o.cycles; k++) {
      const sandbox = `${source}-${k}`;
      try {
        await sh("sync");
        wokenSnapshots.push(latest);
        const woke = await wake(latest, sandbox);
        // The deltas the wake laid over its image or compaction: the depth as resolved.
        const resolvedDepth = ((await api.restore(woke.restoreId)).steps.transfer as { layers?: number } | undefined)?.layers! - 1;
        const woken = await bounded(digestTree(workspace(sandbox)), `cycle ${k}: the woken tree's walk`);
        const diff = compareDigests(slept, woken.digest);
        if (diff.count) errors.push(`cycle ${k}: the woken tree differs from what slept in ${diff.count} entries: ${diff.first.join("; ")}`);
        const firstUseSamplesMs = [woke.commandMs];
        if (k === 1 || k === o.cycles) {
          for (let i = 2; i <= FIRST_USE_SAMPLES; i++) firstUseSamplesMs.push(await sampleFirstUse(latest, `${sandbox}-first-use-${i}`));
          log(`sleep-wake: cycle ${k}: first use over ${FIRST_USE_SAMPLES} wakes: ${firstUseSamplesMs.join(", ")} ms`);
        }
        const written = await applyCycleChange(workspace(sandbox), k, o.changeBytes, baseChoices);
        changed += written;
        await sh("sync");
        const sleep = await snap.backup(sandbox, o.sleep, latest, o.sleep === "files-cas" ? {} : { compactAfter: o.compactAfter });
        // a file-level sleep's step bytes are its index: its pack goes beside it
        const uploaded = (sleep.raw.transfer?.bytes as number) + ((sleep.raw.transfer?.files as { pack?: { bytes: number } } | undefined)?.pack?.bytes ?? 0);
        const manifestBytes = (sleep.raw.archive?.manifest as { manifestBytes?: number } | undefined)?.manifestBytes ?? 0;
        // An overlay delta's depth over its image or compaction; a file-level sleep's, its index's over the whole one.
        const depth = o.sleep === "files-cas" ? ((sleep.raw.transfer?.files as { chain?: unknown[] } | undefined)?.chain?.length ?? 0) : ((sleep.raw.archive as { layer?: { depth?: number } } | undefined)?.layer?.depth) ?? 0;
        const rebase = false;
        const startedCompaction = await watch.afterSleep(sleep.snapshotId!, k);
        // What slept: what the change touched hashed again, the rest as the woken tree's full digest found it.
        slept = (await bounded(digestTree(workspace(sandbox), woken), `cycle ${k}: the slept tree's walk`)).digest;
        latest = sleep.snapshotId!;
        made.push(latest);
        const compactionsEnded = await watch.ended(k);
        for (const c of compactionsEnded) if (c.status === "complete") made.push(c.id);
        const row = {
          cycle: k, usableSeenMs: woke.usableSeenMs, usableMs: woke.usableMs, firstUseMs: woke.commandMs, ...(firstUseSamplesMs.length > 1 ? { firstUseSamplesMs } : {}), firstUseDoneMs: woke.firstUseDoneMs, completeMs: woke.completeMs, toUsable: woke.toUsable ?? {},
          differences: diff.count,
          changedBytes: written, sleepMs: sleep.wallMs, sleepSteps: sleep.steps, uploadedBytes: uploaded, manifestBytes, depth, resolvedDepth, rebase, storedBytes: await storeTotal(), changedTotal: changed,
          ...(startedCompaction ? { compactionStarted: startedCompaction.id } : {}),
          compactionsEnded: compactionsEnded.map((c) => ({ id: c.id, delta: c.delta, afterCycle: c.afterCycle, status: c.status, wallMs: c.wallMs, uploadedBytes: c.uploadedBytes })),
          atMs: Math.round(performance.now() - runStarted),
        };
        results.cycles.push(row);
        log(`sleep-wake: cycle ${k}: woke at depth ${resolvedDepth}: usable ${woke.usableSeenMs} ms, first use ${woke.commandMs} ms, complete ${woke.completeMs} ms${diff.count ? `, ${diff.count} DIFFERENCES` : ", exact"}; sleep ${sleep.wallMs} ms, ${(uploaded / 1e6).toFixed(2)} MB up, chain depth ${depth}${startedCompaction ? `, compaction ${startedCompaction.id} started` : ""}, store ${(row.storedBytes / 1e6).toFixed(1)} MB` +
          compactionsEnded.map((c) => `; compaction of cycle ${c.afterCycle} ${c.status} in ${((c.wallMs ?? 0) / 1000).toFixed(1)} s, ${((c.uploadedBytes ?? 0) / 1e6).toFixed(1)} MB up${c.error ? ` (${c.error})` : ""}`).join(""));
      } catch (e) {
        errors.push(`cycle ${k}: ${(e as Error).message}`);
        log(`sleep-wake: cycle ${k} FAILED: ${(e as Error).message}`);
        break;
      } finally {
        await snap.dispose(sandbox, true).catch(() => api.destroySandbox(sandbox).catch(() => {}));
      }
    }
    // The chain's own cost to first use, apart from what 100 cycles did to the machine: the snapshots cycle 1 and the
    // last cycle woke, woken alternately now (a first-use-lineage experiment found the cycles' own ratio moving with
    // the machine, not with the chain).
    if (results.cycles.length >= 2 && results.cycles.length === o.cycles) {
      const pair = { early: { cycle: 1, snapshotId: wokenSnapshots[0]!, ms: [] as number[] }, late: { cycle: o.cycles, snapshotId: wokenSnapshots[o.cycles - 1]!, ms: [] as number[] } };
      try {
        for (let i = 1; i <= FIRST_USE_ALTERNATED; i++) {
          for (const which of i % 2 ? (["early", "late"] as const) : (["late", "early"] as const)) {
            pair[which].ms.push(await sampleFirstUse(pair[which].snapshotId, `${source}-alternated-${which}-${i}`));
          }
        }
        results.firstUseAlternated = pair;
        log(`sleep-wake: first use woken alternately: cycle 1's snapshot ${pair.early.ms.join(", ")} ms, cycle ${o.cycles}'s ${pair.late.ms.join(", ")} ms`);
      } catch (e) {
        errors.push(`alternated first use: ${(e as Error).message}`);
      }
    }
    // The end: compactions still running awaited, then what the tip does not need deleted and the chunks collected.
    await watch.drain(10 * 60_000);
    for (const c of watch.runs) if (c.endedBy === 0 && c.status === "complete") made.push(c.id);
    results.compactions = watch.runs;
    if (results.cycles.length) {
      try {
        const before = await storeTotal();
        const gc = await collectAllButTip(api, latest, made);
        const after = await storeTotal();
        const sandbox = `${source}-after-gc`;
        const woke = await wake(latest, sandbox);
        const resolvedDepth = ((await api.restore(woke.restoreId)).steps.transfer as { layers?: number } | undefined)?.layers! - 1;
        const diff = compareDigests(slept, (await bounded(digestTree(workspace(sandbox)), "after gc: the woken tree's walk")).digest);
        if (diff.count) errors.push(`after gc: the woken tree differs from what slept in ${diff.count} entries: ${diff.first.join("; ")}`);
        await snap.dispose(sandbox, true).catch(() => api.destroySandbox(sandbox).catch(() => {}));
        results.gc = { storedBefore: before, storedAfter: after, deleted: gc.deleted.length, kept: gc.kept, wake: { usableSeenMs: woke.usableSeenMs, resolvedDepth, differences: diff.count } };
        log(`sleep-wake: gc: ${gc.deleted.length} snapshots deleted, kept ${gc.kept.join(", ")}; store ${(before / 1e6).toFixed(1)} → ${(after / 1e6).toFixed(1)} MB; the tip woke at depth ${resolvedDepth} in ${woke.usableSeenMs} ms${diff.count ? `, ${diff.count} DIFFERENCES` : ", exact"}`);
      } catch (e) {
        errors.push(`gc: ${(e as Error).message}`);
      }
    }
    results.load.end = loadavg();
    const stem = currentResultsStem(o.out, o.name);
    writeFileSync(`${stem}.json`, JSON.stringify(results, null, 1) + "\n");
    writeFileSync(`${stem}.md`, sleepWakeMarkdown(results));
    console.log(sleepWakeMarkdown(results));
    log(`sleep-wake: wrote ${stem}.{json,md}`);
    return errors.length ? 1 : 0;
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
    await stack?.stop();
    await removePrivateStackData(stackDir, (l) => log(`sleep-wake: ${l}`));
  }
}
