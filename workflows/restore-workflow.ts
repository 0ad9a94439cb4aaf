// RestoreWorkflow: probe → transfer → materialize → verify → record, one step.do each (src/restore/run-restore.ts).
// The new tree is built beside the target and swapped in only once verified (container/extract/tree-swap.ts). A failure
// after the probe runs the cleanup step, which puts the target back exactly as it was; a failure after the record
// was written undoes nothing.
import { WorkflowEntrypoint, type WorkflowEvent, type WorkflowStep } from "cloudflare:workers";
import { NonRetryableError } from "cloudflare:workflows";
import { depsFrom } from "../src/deps.ts";
import { CLEANUP_STEP } from "../src/phases/phase-names.ts";
import type { RestoreParams, RestoreProbeResult } from "../src/restore/restore-params.ts";
import { cleanupRestore } from "../src/restore/restore-phases.ts";
import { runRestorePhases } from "../src/restore/run-restore.ts";
import { progressReporter } from "../src/snapshots/progress.ts";
import { releaseTargetLeaseQuietly } from "../src/snapshots/target-leases.ts";
import { releaseLease } from "../src/snapshots/restore-leases.ts";
import type { RunProgress, StepResult } from "../src/snapshots/records.ts";
import { findRestore } from "../src/strategies/registry.ts";
import { wallAndOverhead } from "../src/phases/phase-runner.ts";
import { errorMessage, stepConfigs, stepRunner, totalMs } from "./step-config.ts";

export interface RestoreOutput {
  restoreId: string;
  snapshotId: string;
  strategy: string;
  steps: Record<string, StepResult>;
  totalMs: number;
  wallMs?: number;
  overheadMs?: number;
}

/** A run in a sandbox of its own (a background content check) ends it: best-effort, the run's outcome stands. */
async function endOwnSandbox(step: WorkflowStep, d: ReturnType<typeof depsFrom>, p: RestoreParams): Promise<void> {
  if (!p.endSandbox) return;
  await step.do("end sandbox", { retries: { limit: 2, delay: 1000, backoff: "exponential" }, timeout: "1 minute" }, async () => {
    await d.transport.destroy(p.sandboxId);
    return { sandboxId: p.sandboxId };
  }).catch((e) => console.warn(`ending sandbox ${p.sandboxId} failed: ${errorMessage(e)}`));
}

export class RestoreWorkflow extends WorkflowEntrypoint<Env, RestoreParams> {
  async run(event: WorkflowEvent<RestoreParams>, step: WorkflowStep): Promise<RestoreOutput> {
    const p = event.payload;
    const s = findRestore(p.strategy);
    if (!s) throw new NonRetryableError(`unknown restore strategy ${p.strategy}`);
    const d = depsFrom(this.env);
    const configs = stepConfigs(this.env);
    const progress: RunProgress = { id: p.restoreId, kind: "restore", status: "running", strategy: s.name, startedAt: p.startedAt ?? event.timestamp.toISOString(), steps: {}, snapshotId: p.snapshotId };
    const reporter = progressReporter(d.kv);
    const run = stepRunner(step, { configs, afterStep: (steps) => reporter.report({ ...progress, steps }) });
    reporter.report(progress);
    let probed: RestoreProbeResult | undefined;
    try {
      await runRestorePhases(run, d, p, s, { onProbed: (x) => (probed = x) });
    } catch (e) {
      const touched = probed;
      // The outcome is what the store says, not what threw: a restore whose record was written succeeded, and its
      // cleanup only finishes the commit (success is final).
      const cleaned = touched ? await step.do(CLEANUP_STEP, configs.cleanup, () => cleanupRestore(d, p, s, touched)) : { recorded: false };
      if (!cleaned.recorded) {
        // A probe that failed released its snapshot lease itself, unless the request took it (leasedByRequest).
        if (!touched && p.leasedByRequest) await releaseLease(d.store, p.snapshotId, p.restoreId).catch((le) => console.warn(`lease of ${p.restoreId} on ${p.snapshotId} not released: ${errorMessage(le)}`));
        await releaseTargetLeaseQuietly(d.store, p.sandboxId, p.path, p.restoreId);
        await endOwnSandbox(step, d, p);
        await reporter.final({ ...progress, steps: run.steps, status: "errored", error: errorMessage(e) });
        throw e;
      }
    }
    // The path is free for the next run (best-effort: a lease left behind is taken over once this run has ended).
    await releaseTargetLeaseQuietly(d.store, p.sandboxId, p.path, p.restoreId);
    await endOwnSandbox(step, d, p);
    await reporter.final({ ...progress, steps: run.steps, status: "complete" });
    return { restoreId: p.restoreId, snapshotId: p.snapshotId, strategy: s.name, steps: run.steps, totalMs: totalMs(run.steps), ...wallAndOverhead(run.steps) };
  }
}
