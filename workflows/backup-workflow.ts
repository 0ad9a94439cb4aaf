// BackupWorkflow: probe → archive → transfer → verify → record, one step.do each (see src/backup/backup-phases.ts
// for what each does). On failure a cleanup step removes whatever the run wrote, so no partial snapshot is
// ever listed, and the run's progress in KV says what failed.
import { WorkflowEntrypoint, type WorkflowEvent, type WorkflowStep } from "cloudflare:workers";
import { NonRetryableError } from "cloudflare:workflows";
import * as phases from "../src/backup/backup-phases.ts";
import { depsFrom } from "../src/deps.ts";
import { writeProgress, type RunProgress, type StepResult } from "../src/snapshots/records.ts";
import { findStrategy, type BackupStrategy } from "../src/strategies/registry.ts";
import { CLEANUP_STEP, errorMessage, phaseRunner, STEP_CONFIG, totalMs } from "./step-config.ts";

export type BackupParams = phases.BackupParams & { startedAt?: string };

export interface BackupOutput {
  snapshotId: string;
  strategy: string;
  steps: Record<string, StepResult>;
  totalMs: number;
  archiveBytes: number;
}

export class BackupWorkflow extends WorkflowEntrypoint<Env, BackupParams> {
  async run(event: WorkflowEvent<BackupParams>, step: WorkflowStep): Promise<BackupOutput> {
    const p = event.payload;
    const s = findStrategy(p.strategy);
    if (!s || s.kind !== "backup") throw new NonRetryableError(`unknown backup strategy ${p.strategy}`);
    const d = depsFrom(this.env);
    const steps: Record<string, StepResult> = {};
    const progress: RunProgress = { id: p.snapshotId, kind: "backup", status: "running", strategy: s.name, startedAt: p.startedAt ?? event.timestamp.toISOString(), steps, snapshotId: p.snapshotId };
    const run = phaseRunner(step, d.kv, progress);
    const strategy = s as BackupStrategy;
    try {
      await writeProgress(d.kv, progress);
      await run("probe", () => phases.probePhase(d, p, strategy));
      const archived = await run("archive", () => phases.archivePhase(d, p, strategy));
      const sent = await run("transfer", () => phases.transferPhase(d, p, strategy, archived));
      await run("verify", () => phases.verifyPhase(d, p, strategy, sent));
      await run("record", () => phases.recordPhase(d, p, strategy, archived, sent, { ...steps }));
      progress.status = "complete";
      await writeProgress(d.kv, progress);
      return { snapshotId: p.snapshotId, strategy: s.name, steps, totalMs: totalMs(steps), archiveBytes: sent.bytes };
    } catch (e) {
      await step.do(CLEANUP_STEP, STEP_CONFIG.cleanup!, () => phases.cleanupBackup(d, p, strategy));
      progress.status = "errored";
      progress.error = errorMessage(e);
      await writeProgress(d.kv, progress);
      throw e;
    }
  }
}
