// BackupWorkflow: probe → archive → transfer → verify → record, one step.do each (src/backup/run-backup.ts). A
// failure runs the cleanup step, so nothing half-made is left in the store or the sandbox.
import { WorkflowEntrypoint, type WorkflowEvent, type WorkflowStep } from "cloudflare:workers";
import { NonRetryableError } from "cloudflare:workflows";
import type { BackupParams, TransferResult } from "../src/backup/backup-params.ts";
import { cleanupBackup } from "../src/backup/backup-phases.ts";
import { runBackupPhases } from "../src/backup/run-backup.ts";
import { contentCheckMode, noCheckNeeded, startContentCheck } from "../src/restore/background-check.ts";
import { readSnapshot } from "../src/snapshots/records.ts";
import { depsFrom } from "../src/deps.ts";
import { CLEANUP_STEP } from "../src/phases/phase-names.ts";
import { progressReporter } from "../src/snapshots/progress.ts";
import { releaseTargetLeaseQuietly } from "../src/snapshots/target-leases.ts";
import type { RunProgress, StepResult } from "../src/snapshots/records.ts";
import { findBackup } from "../src/strategies/registry.ts";
import { startCompactionIfDue } from "../src/compaction/start-compaction.ts";
import { wallAndOverhead } from "../src/phases/phase-runner.ts";
import { errorMessage, stepConfigs, stepRunner, totalMs } from "./step-config.ts";

export interface BackupOutput {
  snapshotId: string;
  strategy: string;
  steps: Record<string, StepResult>;
  totalMs: number;
  /** first step's start to last step's end, and the part of it no phase measured as work */
  wallMs?: number;
  overheadMs?: number;
  archiveBytes: number;
}

export class BackupWorkflow extends WorkflowEntrypoint<Env, BackupParams> {
  async run(event: WorkflowEvent<BackupParams>, step: WorkflowStep): Promise<BackupOutput> {
    const p = event.payload;
    const s = findBackup(p.strategy);
    if (!s) throw new NonRetryableError(`unknown backup strategy ${p.strategy}`);
    const d = depsFrom(this.env);
    const configs = stepConfigs(this.env);
    const progress: RunProgress = { id: p.snapshotId, kind: "backup", status: "running", strategy: s.name, startedAt: p.startedAt ?? event.timestamp.toISOString(), steps: {}, snapshotId: p.snapshotId };
    const reporter = progressReporter(d.kv);
    const run = stepRunner(step, { configs, afterStep: (steps) => reporter.report({ ...progress, steps }) });
    reporter.report(progress);
    let sent;
    try {
      sent = await runBackupPhases(run, d, p, s);
    } catch (e) {
      // The outcome is what the store says, not what threw: a backup whose record was written is good (its cleanup
      // removes only staging files), so nothing after `record` can undo it.
      const cleaned = await step.do(CLEANUP_STEP, configs.cleanup, () => cleanupBackup(d, p, s));
      if (!cleaned.recorded) {
        await releaseTargetLeaseQuietly(d.store, p.sandboxId, p.path, p.snapshotId);
        await reporter.final({ ...progress, steps: run.steps, status: "errored", error: errorMessage(e) });
        throw e;
      }
      sent = run.steps.transfer as TransferResult;
    }
    // Recorded: the snapshot is good. Nothing from here on may undo it.
    // The path is free for the next run (best-effort: a lease left behind is taken over once this run has ended).
    await releaseTargetLeaseQuietly(d.store, p.sandboxId, p.path, p.snapshotId);
    await reporter.final({ ...progress, steps: run.steps, status: "complete" });
    // An image's content checked against its manifest once, off every restore's path (background-check.ts). A
    // format every restore checks as it goes (tar, file-level) or a delta skips the step: it would only say so, ~15 ms
    // after the snapshot is complete and before the run's status can say it is.
    if (contentCheckMode(this.env, p.contentCheck) === "background" && !noCheckNeeded({ format: s.format, delta: s.delta })) {
      await step.do("content check", configs.record, async () => {
        const record = await readSnapshot(d.store, d.kv, p.snapshotId);
        return record ? await startContentCheck(this.env, d, record) : { skipped: "no record" };
      }).catch((e) => console.warn(`the content check of ${p.snapshotId} did not start: ${errorMessage(e)}`));
    }
    // A sleep's chain compacted in the background when due (the sleep is complete already; it does not wait).
    if (s.delta === "overlay-upper") {
      await step.do("compact", configs.record, () => startCompactionIfDue(this.env.COMPACT_WORKFLOW, d, p.snapshotId, p.compactAfter))
        .catch((e) => console.warn(`compaction after ${p.snapshotId} not started: ${errorMessage(e)}`));
    }
    return { snapshotId: p.snapshotId, strategy: s.name, steps: run.steps, totalMs: totalMs(run.steps), ...wallAndOverhead(run.steps), archiveBytes: sent?.bytes ?? 0 };
  }
}
