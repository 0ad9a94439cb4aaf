// The aggregator, run by the results queue's consumer. For each finished run it rebuilds the matrix's summary from every
// stored run result (so a redelivered message cannot count twice), writes summary.json and summary.md to the
// store, sends the runs now due and refreshes KV's progress cache (best-effort). The queue runs this consumer one
// batch at a time (max_concurrency 1), so a summary is never overwritten by one built from fewer runs; the dead-letter
// consumer runs beside it, but it writes only its own objects (dead-letters.ts), and the sent count moves by
// compare-and-swap (sent-count.ts), so nothing either writes can be lost.
import type { Deps } from "../deps.ts";
import { putJson } from "../snapshots/records.ts";
import { matrixKeys, readMatrix, readRuns } from "./matrix-records.ts";
import { sharedSource } from "./matrix-spec.ts";
import { ResultMessage } from "./messages.ts";
import { refreshProgressCache } from "./progress-cache.ts";
import { sendDueRuns } from "./schedule.ts";
import { buildSummary, summaryMarkdown } from "./summary.ts";
import { SnapflowError } from "../errors.ts";

export async function aggregateMatrix(d: Deps, queue: Queue, matrixId: string): Promise<void> {
  const record = await readMatrix(d.store, matrixId);
  if (!record) throw new SnapflowError("not_found", `matrix ${matrixId} has no record`);
  const runs = await readRuns(d.store, matrixId);
  const summary = buildSummary(matrixId, record.spec.name, record.cells, record.spec.runs, runs);
  await putJson(d.store, matrixKeys(matrixId).summaryJson, summary);
  await d.store.put(matrixKeys(matrixId).summaryMd, summaryMarkdown(summary), { contentType: "text/markdown" });
  // Room for more runs: keep `concurrency` in flight.
  await sendDueRuns(d, queue, record, summary.done);
  await refreshProgressCache(d, matrixId, { record, runs });
  if (summary.done >= summary.total && record.spec.concurrency === 1) {
    // The shared dataset sandboxes are no longer needed.
    for (const i of record.spec.datasets.keys()) await d.transport.destroy(sharedSource(matrixId, i)).catch(() => {});
  }
}

export async function processResult(d: Deps, queue: Queue, body: unknown): Promise<void> {
  const msg = ResultMessage.parse(body);
  await aggregateMatrix(d, queue, msg.matrixId);
}
