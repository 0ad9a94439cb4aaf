// The aggregator, run by the results queue's consumer. For each finished run it rebuilds the matrix's summary from every
// stored run result (so a redelivered message cannot count twice), writes summary.json and summary.md to the
// store and the progress to KV. The queue runs this consumer one batch at a time (max_concurrency 1), so a
// summary is never overwritten by one built from fewer runs.
import type { Deps } from "../deps.ts";
import { putJson } from "../snapshots/records.ts";
import { matrixKeys, readMatrix, readProgress, readRuns, writeProgress } from "./matrix-records.ts";
import { sharedSource } from "./matrix-spec.ts";
import { ResultMessage } from "./messages.ts";
import { sendDueRuns } from "./schedule.ts";
import { buildSummary, summaryMarkdown } from "./summary.ts";

export async function aggregateMatrix(d: Deps, queue: Queue, matrixId: string): Promise<void> {
  const record = await readMatrix(d.store, matrixId);
  if (!record) throw new Error(`matrix ${matrixId} has no record`);
  const runs = await readRuns(d.store, matrixId);
  const summary = buildSummary(matrixId, record.spec.name, record.cells, record.spec.runs, runs);
  await putJson(d.store, matrixKeys(matrixId).summaryJson, summary);
  await d.store.put(matrixKeys(matrixId).summaryMd, summaryMarkdown(summary), { contentType: "text/markdown" });
  const progress = await readProgress(d.kv, matrixId);
  await writeProgress(d.kv, {
    id: matrixId, name: record.spec.name, trigger: record.trigger, createdAt: record.createdAt, deadLettered: progress?.deadLettered ?? [],
    total: summary.total, sent: progress?.sent ?? 0, done: summary.done, failed: summary.failed,
    status: summary.done >= summary.total ? "complete" : "running",
    updatedAt: summary.updatedAt,
  });
  // Room for more runs: keep `concurrency` in flight.
  await sendDueRuns(d, queue, record, summary.done);
  if (summary.done >= summary.total && record.spec.concurrency === 1) {
    // The shared dataset sandboxes are no longer needed.
    for (const i of record.spec.datasets.keys()) await d.transport.destroy(sharedSource(matrixId, i)).catch(() => {});
  }
}

export async function processResult(d: Deps, queue: Queue, body: unknown): Promise<void> {
  const msg = ResultMessage.parse(body);
  await aggregateMatrix(d, queue, msg.matrixId);
}
