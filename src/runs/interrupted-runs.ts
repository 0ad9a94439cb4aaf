// The watchdog for interrupted runs. Every backup and restore in flight holds its target's lease in the store
// (snapshots/target-leases.ts), so listing targets/ lists them; each lease names its run and carries its params.
// For each, the run's Workflow is asked its status, and:
//   - live and moving → left alone;
//   - live but interrupted → paused and resumed, so it runs again from its first step not completed (the steps
//     before it keep their results); its status then says it was interrupted and resumed. "Interrupted" means: the
//     engine restarted after the run began (the local stack fires this once when it is up, with that moment) — or,
//     on the cron, no step ended for longer than any step may take with its retries (RUN_STALL_MS);
//   - interrupted too often, or not resumable, or its Workflow gone, or ended without its cleanup → its cleanup
//     (the same cleanupBackup / cleanupRestore its Workflow runs on failure) is run here, its lease released and its
//     progress marked errored with the reason.
//
// Why: `wrangler dev` killed mid-step and started again leaves the instance "running" for ever, its step
// "Working", nothing moving (seen: 10+ minutes; pause then resume starts it again at the interrupted step).
// Cloudflare's Workflows resume instances themselves after their own infrastructure restarts, so in production
// this is a safety net on the cron; its behaviour there has not been observed here.
//
// Benchmark cells (the matrix's BenchmarkCellWorkflow) hold no lease: after a stack restart the cells of running
// matrices are resumed by interrupted-cells.ts.
import { z } from "zod";
import { cleanupBackup } from "../backup/backup-phases.ts";
import type { BackupParams } from "../backup/backup-params.ts";
import { depsFrom, type Deps } from "../deps.ts";
import { STACK_START_TRIGGER } from "../snapshots/lifecycle-schedule.ts";
import { errorMessage } from "../errors.ts";
import { BACKUP_PHASES, RESTORE_PHASES } from "../phases/phase-names.ts";
import { cleanupRestore } from "../restore/restore-phases.ts";
import type { RestoreParams, RestoreProbeResult } from "../restore/restore-params.ts";
import { reportProgress } from "../snapshots/progress.ts";
import { readProgress, type RunProgress } from "../snapshots/records.ts";
import { parsedLeaseAt, releaseTargetLease, TARGET_LEASE_GRACE_MS, TARGETS_PREFIX, type TargetLease } from "../snapshots/target-leases.ts";
import { listAll } from "../store/list-all.ts";
import { findBackup, findRestore } from "../strategies/registry.ts";
import { noteInterruption, readInterruptions, type Interruption } from "./interruptions.ts";
import { resumeInterruptedCells } from "./interrupted-cells.ts";
import { instanceOf } from "./run-liveness.ts";
import { pauseThenResume, StillPausing, terminateQuietly } from "./workflow-controls.ts";
import { SnapflowError } from "../errors.ts";

/** Longer than any step may take with all its retries (the transfer: 4 attempts of 60 min, plus delays). */
export const RUN_STALL_MS = 5 * 3600_000;
/** A run interrupted this many times is failed rather than resumed again. */
export const MAX_INTERRUPTIONS = 3;


export interface WatchdogOptions {
  now?: number;
  /** the engine (re)started at this time: a live run whose lease is older was in flight when it stopped */
  restartedAt?: number;
  stallMs?: number;
  /** only this sandbox's runs (tests share one store between files) */
  sandboxId?: string;
}

export interface WatchdogReport {
  checked: number;
  left: { runId: string; status: string }[];
  resumed: { runId: string; kind: string; from: string }[];
  failed: { runId: string; kind: string; reason: string }[];
  released: { runId: string; why: string }[];
  /** leases or runs the watchdog could not handle this time (the next pass tries again) */
  errors: { key: string; error: string }[];
}

type Status = InstanceStatus["status"] | "gone";

/**
 * The scheduled handler's entry: on the cron, stalls only; on the local stack's start-up trigger (its scheduled time
 * is the moment the stack came up), every run begun before that and still running was cut off by the restart.
 */
export async function runWatchdog(env: Env, trigger: string, scheduledTime: number): Promise<WatchdogReport> {
  const restartedAt = trigger === STACK_START_TRIGGER ? scheduledTime : undefined;
  const d = depsFrom(env);
  const report = await watchRuns(env, d, { now: Date.now(), restartedAt });
  console.log(`watchdog (${trigger}): ${JSON.stringify(report)}`);
  const cells = await resumeInterruptedCells(env, d, restartedAt);
  if (cells.resumed.length || cells.errors.length) console.log(`watchdog (${trigger}), matrix cells: ${JSON.stringify(cells)}`);
  return report;
}

export async function watchRuns(env: Env, d: Deps, options: WatchdogOptions = {}): Promise<WatchdogReport> {
  const now = options.now ?? Date.now();
  const report: WatchdogReport = { checked: 0, left: [], resumed: [], failed: [], released: [], errors: [] };
  for await (const o of listAll(d.store, options.sandboxId ? `${TARGETS_PREFIX}${options.sandboxId}/` : TARGETS_PREFIX)) {
    try {
      const found = await parsedLeaseAt(d.store, o.key);
      if (!found) continue;
      if ("error" in found) {
        report.errors.push({ key: o.key, error: found.error });
        continue;
      }
      report.checked++;
      await checkRun(env, d, found.lease, now, options, report);
    } catch (e) {
      report.errors.push({ key: o.key, error: errorMessage(e) });
    }
  }
  return report;
}

async function checkRun(env: Env, d: Deps, lease: TargetLease, now: number, options: WatchdogOptions, report: WatchdogReport): Promise<void> {
  const instance = await instanceOf(env, lease.kind, lease.runId);
  const status: Status = instance ? (await instance.status()).status : "gone";
  const progress = await readProgress(d.kv, lease.runId);
  const notes = await readInterruptions(d.kv, lease.runId);
  const at = new Date(now).toISOString();

  if (status === "complete") {
    // It ended well and only its lease release was lost.
    await releaseTargetLease(d.store, lease.sandboxId, lease.path, lease.runId);
    report.released.push({ runId: lease.runId, why: "its Workflow completed" });
    return;
  }
  if (status === "gone" || status === "unknown") {
    if (now - Date.parse(lease.takenAt) < TARGET_LEASE_GRACE_MS) return void report.left.push({ runId: lease.runId, status: "starting" });
    return failRun(d, lease, progress, report, { at, cause: "its Workflow cannot be found", action: "failed" }, "its Workflow is gone (never created, or deleted): nothing can continue it");
  }
  if (status === "errored" && progress?.status === "errored") {
    // Its failure path ran (the errored progress is written after its cleanup); only the lease release was lost.
    await releaseTargetLease(d.store, lease.sandboxId, lease.path, lease.runId);
    report.released.push({ runId: lease.runId, why: "its Workflow failed and cleaned up" });
    return;
  }
  if (status === "errored" || status === "terminated") {
    // Ended without releasing its lease: its own cleanup may not have run (a terminated run never runs it).
    return failRun(d, lease, progress, report, { at, cause: `its Workflow is ${status}`, action: "failed" }, progress?.error ?? `its Workflow was ${status} before its cleanup finished`);
  }
  // Pausing (ours, finishing its step first) or rolling back: the engine is busy with it; the next pass looks again.
  if (status === "waitingForPause" || status === "rollingBack") return void report.left.push({ runId: lease.runId, status });
  const pausing = notes.at(-1)?.action === "pausing";
  if (status === "paused" && !pausing) return void report.left.push({ runId: lease.runId, status }); // someone paused it
  const lastActivity = Math.max(Date.parse(lease.takenAt), ...Object.values(progress?.steps ?? {}).map((s) => Number((s as { endedAt?: number }).endedAt ?? 0)), ...notes.map((n) => Date.parse(n.at)));
  const stallMs = options.stallMs ?? RUN_STALL_MS;
  const cause =
    options.restartedAt !== undefined && Date.parse(lease.takenAt) < options.restartedAt && (status === "running" || status === "waiting")
      ? `the stack restarted at ${new Date(options.restartedAt).toISOString()} while it ran`
      : now - lastActivity > stallMs
        ? `no step ended for ${Math.round((now - lastActivity) / 60_000)} min, longer than any step may take (${stallMs / 60_000} min)`
        : pausing
          ? notes.at(-1)!.cause
          : undefined;
  if (!cause) return void report.left.push({ runId: lease.runId, status });

  const earlier = notes.filter((n) => n.action === "resumed").length;
  if (earlier >= MAX_INTERRUPTIONS) {
    await terminateQuietly(instance!);
    return failRun(d, lease, progress, report, { at, cause, action: "failed" }, `interrupted ${earlier + 1} times (${cause}); not resumed again`);
  }
  const from = nextStep(lease.kind, progress);
  try {
    await pauseThenResume(instance!, async () => void (await noteInterruption(d.kv, lease.runId, { at, cause, action: "pausing", detail: `at ${from}` })), status === "paused");
  } catch (e) {
    if (e instanceof StillPausing) return void report.left.push({ runId: lease.runId, status: "waitingForPause" });
    await terminateQuietly(instance!);
    return failRun(d, lease, progress, report, { at, cause, action: "failed" }, `could not be resumed (${errorMessage(e)})`);
  }
  await noteInterruption(d.kv, lease.runId, { at, cause, action: "resumed", detail: `at ${from}, its first step not completed` });
  report.resumed.push({ runId: lease.runId, kind: lease.kind, from });
  console.log(`watchdog: ${lease.kind} ${lease.runId} interrupted (${cause}); resumed at ${from}`);
}

const nextStep = (kind: "backup" | "restore", progress: RunProgress | null) =>
  (kind === "backup" ? BACKUP_PHASES : RESTORE_PHASES).find((p) => !progress?.steps[p]) ?? "its end";

/**
 * A run that cannot continue: its Workflow's own cleanup (whatever it wrote in the store and the sandbox goes; a
 * restore's target is put back as it was), then its lease, then its progress `errored` with the reason. A run whose
 * record was written is good (success is final): its cleanup finishes it instead, and its progress says complete.
 */
async function failRun(d: Deps, lease: TargetLease, progress: RunProgress | null, report: WatchdogReport, note: Interruption, reason: string): Promise<void> {
  const recorded = await cleanupFor(d, lease, progress);
  await releaseTargetLease(d.store, lease.sandboxId, lease.path, lease.runId);
  const base: RunProgress = progress ?? { id: lease.runId, kind: lease.kind, status: "running", strategy: String((lease.params as { strategy?: unknown } | undefined)?.strategy ?? "unknown"), startedAt: lease.takenAt, steps: {} };
  if (recorded) {
    await noteInterruption(d.kv, lease.runId, { ...note, action: "released", detail: "its record was written: complete" });
    await reportProgress(d.kv, { ...base, status: "complete" });
    report.released.push({ runId: lease.runId, why: "recorded before it was interrupted" });
    return;
  }
  await noteInterruption(d.kv, lease.runId, { ...note, detail: reason });
  if (base.status !== "errored" && base.status !== "cancelled") await reportProgress(d.kv, { ...base, status: "errored", error: `${lease.kind} ${lease.runId} failed: ${reason}; its cleanup was done` });
  report.failed.push({ runId: lease.runId, kind: lease.kind, reason });
  console.log(`watchdog: ${lease.kind} ${lease.runId} failed: ${reason}`);
}

/** Runs the kind's cleanup with the params the lease carries; answers whether the run had been recorded (cancel-run.ts too). */
export async function cleanupFor(d: Deps, lease: TargetLease, progress: RunProgress | null): Promise<boolean> {
  const p = lease.params as Record<string, unknown> | undefined;
  if (!p || typeof p.strategy !== "string") {
    console.warn(`watchdog: the lease of ${lease.runId} carries no params; its cleanup is left to the sweepers`);
    return false;
  }
  if (lease.kind === "backup") {
    const s = findBackup(p.strategy);
    if (!s) throw new SnapflowError("bad_request", `backup ${lease.runId}: unknown strategy ${p.strategy}`, { field: "strategy" });
    return (await cleanupBackup(d, p as unknown as BackupParams, s)).recorded;
  }
  const s = findRestore(p.strategy);
  if (!s) throw new SnapflowError("bad_request", `restore ${lease.runId}: unknown strategy ${p.strategy}`, { field: "strategy" });
  // Before its probe a restore has touched nothing: there is nothing to put back.
  const probed = progress?.steps.probe as RestoreProbeResult | undefined;
  if (!probed) return false;
  return (await cleanupRestore(d, p as unknown as RestoreParams, s, probed)).recorded;
}
