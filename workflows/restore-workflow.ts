// RestoreWorkflow: probe → transfer → materialize → verify → record, one step.do each (src/restore/run-restore.ts).
// A failure after the probe runs the cleanup step, which empties the target again, so a half-restored tree is
// never left looking like a restore.
import { WorkflowEntrypoint, type WorkflowEvent, type WorkflowStep } from "cloudflare:workers";
import { NonRetryableError } from "cloudflare:workflows";
import { depsFrom } from "../src/deps.ts";
import { CLEANUP_STEP } from "../src/phases/phase-names.ts";
import type { RestoreParams, RestoreProbeResult } from "../src/restore/restore-params.ts";
import { cleanupRestore } from "../src/restore/restore-phases.ts";
import { runRestorePhases } from "../src/restore/run-restore.ts";
import { reportProgress } from "../src/snapshots/progress.ts";
import type { RunProgress, StepResult } from "../src/snapshots/records.ts";
import { findRestore } from "../src/strategies/registry.ts";
import { wallAndOverhead } from "../src/phases/phase-runner.ts";
import { errorMessage, STEP_CONFIG, stepRunner, totalMs } from "./step-config.ts";

export interface RestoreOutput {
  restoreId: string;
  snapshotId: string;
  strategy: string;
  steps: Record<string, StepResult>;
  totalMs: number;
  wallMs?: number;
  overheadMs?: number;
}

export class RestoreWorkflow extends WorkflowEntrypoint<Env, RestoreParams> {
  async run(event: WorkflowEvent<RestoreParams>, step: WorkflowStep): Promise<RestoreOutput> {
    const p = event.payload;
    const s = findRestore(p.strategy);
    if (!s) throw new NonRetryableError(`unknown restore strategy ${p.strategy}`);
    const d = depsFrom(this.env);
    const progress: RunProgress = { id: p.restoreId, kind: "restore", status: "running", strategy: s.name, startedAt: p.startedAt ?? event.timestamp.toISOString(), steps: {}, snapshotId: p.snapshotId };
    const run = stepRunner(step, { afterStep: (steps) => reportProgress(d.kv, { ...progress, steps }) });
    await reportProgress(d.kv, progress);
    let probed: RestoreProbeResult | undefined;
    try {
      await runRestorePhases(run, d, p, s, { onProbed: (x) => (probed = x) });
    } catch (e) {
      const touched = probed;
      if (touched) await step.do(CLEANUP_STEP, STEP_CONFIG.cleanup, () => cleanupRestore(d, p, s, touched));
      await reportProgress(d.kv, { ...progress, steps: run.steps, status: "errored", error: errorMessage(e) });
      throw e;
    }
    await reportProgress(d.kv, { ...progress, steps: run.steps, status: "complete" });
    return { restoreId: p.restoreId, snapshotId: p.snapshotId, strategy: s.name, steps: run.steps, totalMs: totalMs(run.steps), ...wallAndOverhead(run.steps) };
  }
}
