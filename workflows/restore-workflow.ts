// RestoreWorkflow: probe → transfer → materialize → verify → record, one step.do each (see
// src/restore/restore-phases.ts). A failure after the probe empties the target again, so a half-restored tree
// is never left looking like a restore.
import { WorkflowEntrypoint, type WorkflowEvent, type WorkflowStep } from "cloudflare:workers";
import { NonRetryableError } from "cloudflare:workflows";
import { depsFrom } from "../src/deps.ts";
import * as phases from "../src/restore/restore-phases.ts";
import { writeProgress, type RunProgress, type StepResult } from "../src/snapshots/records.ts";
import { findStrategy, type RestoreStrategy } from "../src/strategies/registry.ts";
import { CLEANUP_STEP, errorMessage, phaseRunner, STEP_CONFIG, totalMs } from "./step-config.ts";

export type RestoreParams = phases.RestoreParams & { startedAt?: string };

export interface RestoreOutput {
  restoreId: string;
  snapshotId: string;
  strategy: string;
  steps: Record<string, StepResult>;
  totalMs: number;
}

export class RestoreWorkflow extends WorkflowEntrypoint<Env, RestoreParams> {
  async run(event: WorkflowEvent<RestoreParams>, step: WorkflowStep): Promise<RestoreOutput> {
    const p = event.payload;
    const found = findStrategy(p.strategy);
    if (!found || found.kind !== "restore") throw new NonRetryableError(`unknown restore strategy ${p.strategy}`);
    const s = found as RestoreStrategy;
    const d = depsFrom(this.env);
    const steps: Record<string, StepResult> = {};
    const progress: RunProgress = { id: p.restoreId, kind: "restore", status: "running", strategy: s.name, startedAt: p.startedAt ?? event.timestamp.toISOString(), steps, snapshotId: p.snapshotId };
    const run = phaseRunner(step, d.kv, progress);
    let probed: phases.RestoreProbeResult | undefined;
    try {
      await writeProgress(d.kv, progress);
      probed = await run("probe", () => phases.probePhase(d, p, s));
      const snapshot = probed;
      await run("transfer", () => phases.transferPhase(d, p, s, snapshot));
      await run("materialize", () => phases.materializePhase(d, p, s, snapshot));
      await run("verify", () => phases.verifyPhase(d, p, snapshot));
      await run("record", () => phases.recordPhase(d, p, s, { ...steps }));
      progress.status = "complete";
      await writeProgress(d.kv, progress);
      return { restoreId: p.restoreId, snapshotId: p.snapshotId, strategy: s.name, steps, totalMs: totalMs(steps) };
    } catch (e) {
      const snapshot = probed;
      if (snapshot) await step.do(CLEANUP_STEP, STEP_CONFIG.cleanup!, () => phases.cleanupRestore(d, p, s, snapshot));
      progress.status = "errored";
      progress.error = errorMessage(e);
      await writeProgress(d.kv, progress);
      throw e;
    }
  }
}
