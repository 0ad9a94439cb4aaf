// BenchmarkCellWorkflow: one run of one matrix cell. It starts (or reuses) a sandbox, generates the cell's dataset,
// runs the backup and restore phase sequences as its own steps (the same sequences the Backup and Restore
// Workflows use, so timings are comparable), records the run's result in the store and tells the aggregator.
// A failed phase does not fail the Workflow: the failure, with its error, is the run's result, so a broken cell
// never stalls its matrix. The benchmark's snapshot is deleted afterwards; benchmark data is transient.
import { WorkflowEntrypoint, type WorkflowEvent, type WorkflowStep } from "cloudflare:workers";
import type { BackupParams } from "../src/backup/backup-params.ts";
import { runBackupPhases } from "../src/backup/run-backup.ts";
import { depsFrom } from "../src/deps.ts";
import { KV_KEYS } from "../src/kv-keys.ts";
import { writeAfterKvWindow } from "../src/kv-write-retry.ts";
import type { CellParams } from "../src/matrix/cell-params.ts";
import { readMatrix, writeRun } from "../src/matrix/matrix-records.ts";
import { sharedSource } from "../src/matrix/matrix-spec.ts";
import type { RunResult } from "../src/matrix/summary.ts";
import type { RestoreParams, RestoreProbeResult } from "../src/restore/restore-params.ts";
import { cleanupRestore } from "../src/restore/restore-phases.ts";
import { runRestorePhases } from "../src/restore/run-restore.ts";
import { AgentClient } from "../src/sandbox/agent-client.ts";
import { sandboxPaths } from "../src/sandbox/sandbox-paths.ts";
import { archiveKey, manifestKey, snapshotRecordKey } from "../src/snapshots/records.ts";
import { leaseKey } from "../src/snapshots/restore-leases.ts";
import { findBackup, findRestore } from "../src/strategies/registry.ts";
import { errorMessage, stepConfigs, stepRunner, totalMs } from "./step-config.ts";
import { SnapflowError } from "../src/errors.ts";

const since = (t: number) => Math.round(performance.now() - t);

export class BenchmarkCellWorkflow extends WorkflowEntrypoint<Env, CellParams> {
  async run(event: WorkflowEvent<CellParams>, step: WorkflowStep): Promise<{ runKey: string; ok: boolean; error?: string }> {
    const { matrixId, runKey, cell, run } = event.payload;
    const d = depsFrom(this.env);
    const configs = stepConfigs(this.env);
    const matrix = await step.do("matrix", configs.record, async () => {
      const m = await readMatrix(d.store, matrixId);
      if (!m) throw new SnapflowError("not_found", `matrix ${matrixId} has no record`);
      return { spec: m.spec };
    });
    const spec = matrix.spec;
    const isolated = spec.isolated;
    const datasetIndex = spec.datasets.findIndex((x) => x.name === cell.dataset);
    // The restore target: a fresh sandbox per run when isolated, else one per cell. The source holding the dataset:
    // one per matrix and dataset when runs go one at a time (generated once, then reused), else one per run.
    const source = spec.concurrency === 1 ? sharedSource(matrixId, datasetIndex) : `${runKey}-src`;
    const target = isolated ? `${runKey}-dst` : `${matrixId}-c${cell.index}-dst`;
    // The matrix spec was validated against the registry when the matrix started.
    const b = findBackup(cell.backup)!;
    const r = findRestore(cell.restore)!;
    const result: RunResult = { matrixId, runKey, cell, run, ok: false, finishedAt: "" };
    let restoreProbed: RestoreProbeResult | undefined;
    const backupRun = stepRunner(step, { configs, prefix: "backup" });
    const restoreRun = stepRunner(step, { configs, prefix: "restore" });
    const bp: BackupParams = { snapshotId: runKey, sandboxId: source, path: "/workspace/app", strategy: b.name, dropCaches: spec.dropCaches };
    const rp: RestoreParams = { restoreId: `${runKey}-restore`, snapshotId: runKey, sandboxId: target, path: "/workspace/app", strategy: r.name, replace: true, dropCaches: spec.dropCaches };

    try {
      result.sandboxStartMs = (await step.do("sandbox", configs.probe, async () => {
        const t = performance.now();
        // The first request to a fresh sandbox starts it (in production, the container); that is the start time.
        await new AgentClient(d.transport, source).probe();
        return { ms: since(t), bytes: 0 };
      })).ms;
      const dataset = spec.datasets.find((x) => x.name === cell.dataset)!;
      await step.do("dataset", configs.archive, async () => {
        const agent = new AgentClient(d.transport, source);
        const { name, ...body } = dataset;
        // A marker records which spec the source holds, so a shared source is generated once.
        const marker = sandboxPaths.datasetMarker(name);
        const wanted = JSON.stringify(body);
        const have = await agent.readFile(marker).then((r) => r.text(), () => null);
        if (have === wanted) return { ms: 0, bytes: 0, reused: true };
        const made = await agent.generateDataset({ ...body, path: "/workspace/app", replace: true });
        await agent.writeFile(marker, new Response(wanted).body!);
        return { ms: made.ms, bytes: made.bytes, files: made.files };
      });
      const sent = await runBackupPhases(backupRun, d, bp, b);
      result.backup = { steps: backupRun.steps, totalMs: totalMs(backupRun.steps), archiveBytes: sent.bytes };
      // The cell's result is its record: no restore record step.
      await runRestorePhases(restoreRun, d, rp, r, { record: false, onProbed: (x) => (restoreProbed = x) });
      result.restore = { steps: restoreRun.steps, totalMs: totalMs(restoreRun.steps) };
      result.ok = true;
    } catch (e) {
      result.error = errorMessage(e);
      // A restore that failed past its probe leaves its new tree beside the target and a swap journal: roll back.
      const touched = restoreProbed;
      if (touched) await step.do("restore cleanup", configs.cleanup, () => cleanupRestore(d, rp, r, touched)).catch((c) => console.warn(`restore cleanup of ${rp.restoreId} failed: ${errorMessage(c)}`));
      if (!result.backup && Object.keys(backupRun.steps).length) result.backup = { steps: backupRun.steps, totalMs: totalMs(backupRun.steps), archiveBytes: 0 };
    }

    return step.do("result", configs.record, async () => {
      const finished: RunResult = { ...result, finishedAt: new Date().toISOString() };
      await writeRun(d.store, finished);
      await this.env.RESULTS_QUEUE.send({ type: "result", matrixId, runKey });
      // Benchmark data is transient: the snapshot, its index entry and the sandboxes go.
      // So does the lease of a restore that failed before its end (restore-leases.ts).
      await d.store.delete([archiveKey(runKey, b.format), manifestKey(runKey), snapshotRecordKey(runKey), leaseKey(runKey, rp.restoreId)]);
      // Its index entry too: the record step wrote it moments ago, so KV may refuse a delete within its one-second
      // window; wait it out, and if still refused leave it to the cron's reconcile (an entry without a record is dropped).
      await writeAfterKvWindow(() => d.kv.delete(KV_KEYS.snapshot(runKey))).catch((e: unknown) => console.warn(`index entry of ${runKey} left for the reconcile: ${e instanceof Error ? e.message : String(e)}`));
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
