// BenchmarkCellWorkflow: one run of one matrix cell. It starts (or reuses) a sandbox, generates the cell's dataset,
// runs the backup phases and the restore phases as its own steps (the same phase functions the Backup and Restore
// Workflows use, so timings are comparable), records the run's result in the store and tells the aggregator.
// A failed phase does not fail the Workflow: the failure, with its error, is the run's result, so a broken cell
// never stalls its matrix. The benchmark's snapshot is deleted afterwards; benchmark data is transient.
import { WorkflowEntrypoint, type WorkflowEvent, type WorkflowStep } from "cloudflare:workers";
import * as backup from "../src/backup/backup-phases.ts";
import { depsFrom } from "../src/deps.ts";
import { writeRun } from "../src/matrix/matrix-records.ts";
import { readMatrix } from "../src/matrix/matrix-records.ts";
import { sharedSource, type Cell } from "../src/matrix/matrix-spec.ts";
import type { RunResult } from "../src/matrix/summary.ts";
import * as restore from "../src/restore/restore-phases.ts";
import { AgentClient } from "../src/sandbox/agent-client.ts";
import { archiveKey, manifestKey, snapshotRecordKey, type StepResult } from "../src/snapshots/records.ts";
import { findStrategy, type BackupStrategy, type RestoreStrategy } from "../src/strategies/registry.ts";
import { errorMessage, phase, STEP_CONFIG, totalMs } from "./step-config.ts";

export interface CellParams {
  matrixId: string;
  runKey: string;
  cell: Cell;
  run: number;
}

const since = (t: number) => Math.round(performance.now() - t);


export class BenchmarkCellWorkflow extends WorkflowEntrypoint<Env, CellParams> {
  async run(event: WorkflowEvent<CellParams>, step: WorkflowStep): Promise<{ runKey: string; ok: boolean; error?: string }> {
    const { matrixId, runKey, cell, run } = event.payload;
    const d = depsFrom(this.env);
    const matrix = await step.do("matrix", STEP_CONFIG.record!, async () => {
      const m = await readMatrix(d.store, matrixId);
      if (!m) throw new Error(`matrix ${matrixId} has no record`);
      return { spec: m.spec };
    });
    const spec = matrix.spec;
    const isolated = spec.isolated;
    const datasetIndex = spec.datasets.findIndex((x) => x.name === cell.dataset);
    // The restore target: a fresh sandbox per run when isolated, else one per cell. The source holding the dataset:
    // one per matrix and dataset when runs go one at a time (generated once, then reused), else one per run.
    const source = spec.concurrency === 1 ? sharedSource(matrixId, datasetIndex) : `${runKey}-src`;
    const target = isolated ? `${runKey}-dst` : `${matrixId}-c${cell.index}-dst`;
    const b = findStrategy(cell.backup) as BackupStrategy;
    const r = findStrategy(cell.restore) as RestoreStrategy;
    const result: RunResult = { matrixId, runKey, cell, run, ok: false, finishedAt: "" };
    const backupSteps: Record<string, StepResult> = {};
    const restoreSteps: Record<string, StepResult> = {};
    const bp: backup.BackupParams = { snapshotId: runKey, sandboxId: source, path: "/workspace/app", strategy: b.name, dropCaches: spec.dropCaches };
    const rp: restore.RestoreParams = { restoreId: `${runKey}-restore`, snapshotId: runKey, sandboxId: target, path: "/workspace/app", strategy: r.name, replace: true, dropCaches: spec.dropCaches };
    const phaseStep = async <T extends StepResult>(name: string, config: string, into: Record<string, StepResult>, fn: () => Promise<T>) => {
      const out = (await step.do(name, STEP_CONFIG[config]!, () => phase(fn) as Promise<never>)) as T;
      into[config] = out;
      return out;
    };

    try {
      result.sandboxStartMs = (await step.do("sandbox", STEP_CONFIG.probe!, async () => {
        const t = performance.now();
        // The first request to a fresh sandbox starts it (in production, the container); that is the start time.
        await new AgentClient(d.transport, source).probe();
        return { ms: since(t), bytes: 0 };
      })).ms;
      const dataset = spec.datasets.find((x) => x.name === cell.dataset)!;
      await step.do("dataset", STEP_CONFIG.archive!, async () => {
        const agent = new AgentClient(d.transport, source);
        const { name, ...body } = dataset;
        // A marker records which spec the source holds, so a shared source is generated once.
        const marker = `/snapflow/datasets/${name}.json`;
        const wanted = JSON.stringify(body);
        const have = await agent.readFile(marker).then((r) => r.text(), () => null);
        if (have === wanted) return { ms: 0, bytes: 0, reused: true };
        const made = await agent.generateDataset({ ...body, path: "/workspace/app", replace: true });
        await agent.writeFile(marker, new Response(wanted).body!);
        return { ms: made.ms, bytes: made.bytes, files: made.files };
      });
      await phaseStep("backup probe", "probe", backupSteps, () => backup.probePhase(d, bp, b));
      const archived = await phaseStep("backup archive", "archive", backupSteps, () => backup.archivePhase(d, bp, b));
      const sent = await phaseStep("backup transfer", "transfer", backupSteps, () => backup.transferPhase(d, bp, b, archived));
      await phaseStep("backup verify", "verify", backupSteps, () => backup.verifyPhase(d, bp, b, sent));
      await phaseStep("backup record", "record", backupSteps, () => backup.recordPhase(d, bp, b, archived, sent, { ...backupSteps }));
      result.backup = { steps: backupSteps, totalMs: totalMs(backupSteps), archiveBytes: sent.bytes };

      const probed = await phaseStep("restore probe", "probe", restoreSteps, () => restore.probePhase(d, rp, r));
      await phaseStep("restore transfer", "transfer", restoreSteps, () => restore.transferPhase(d, rp, r, probed));
      await phaseStep("restore materialize", "materialize", restoreSteps, () => restore.materializePhase(d, rp, r, probed));
      await phaseStep("restore verify", "verify", restoreSteps, () => restore.verifyPhase(d, rp, probed));
      result.restore = { steps: restoreSteps, totalMs: totalMs(restoreSteps) };
      result.ok = true;
    } catch (e) {
      result.error = errorMessage(e);
      if (!result.backup && Object.keys(backupSteps).length) result.backup = { steps: backupSteps, totalMs: totalMs(backupSteps), archiveBytes: 0 };
    }

    return step.do("result", STEP_CONFIG.record!, async () => {
      const finished: RunResult = { ...result, finishedAt: new Date().toISOString() };
      await writeRun(d.store, finished);
      await this.env.RESULTS_QUEUE.send({ type: "result", matrixId, runKey });
      // Benchmark data is transient: the snapshot, its index entry and the sandboxes go.
      await d.store.delete([archiveKey(runKey, b.format), manifestKey(runKey), snapshotRecordKey(runKey)]);
      await d.kv.delete(`snapshot:${runKey}`);
      if (isolated) {
        await d.transport.destroy(target).catch(() => {});
        if (source !== sharedSource(matrixId, datasetIndex)) await d.transport.destroy(source).catch(() => {});
      } else {
        await new AgentClient(d.transport, target).unmount(rp.path).catch(() => {});
      }
      // The full result is in the store; the step (and Workflow) output stays small.
      return { runKey, ok: finished.ok, ...(finished.error ? { error: finished.error } : {}) };
    });
  }
}
