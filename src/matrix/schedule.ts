// Starting a matrix: write its record, then send its first `concurrency` runs to the matrix queue. The rest follow
// as runs finish: the aggregator sends more so that at most `concurrency` runs are in flight (sendDueRuns).
// Idempotent: a re-sent run message finds its Workflow instance already there.
import type { Deps } from "../deps.ts";
import { putJson } from "../snapshots/records.ts";
import { matrixKeys, type MatrixRecord } from "./matrix-records.ts";
import { cellsOf, runsOf, type MatrixSpec } from "./matrix-spec.ts";
import type { CellMessage } from "./messages.ts";
import { refreshProgressCache } from "./progress-cache.ts";
import { advanceSentCount, readSentCount } from "./sent-count.ts";
import { SnapflowError } from "../errors.ts";

const SEND_BATCH = 100; // Queues' sendBatch limit
const CAS_ATTEMPTS = 20;

export async function startMatrix(d: Deps, queue: Queue, id: string, spec: MatrixSpec, trigger: MatrixRecord["trigger"]): Promise<MatrixRecord> {
  const cells = cellsOf(spec);
  const record: MatrixRecord = { id, spec, cells, createdAt: new Date().toISOString(), trigger };
  await putJson(d.store, matrixKeys(id).record, record);
  await sendDueRuns(d, queue, record, 0);
  await refreshProgressCache(d, id);
  return record;
}

/**
 * Sends the runs that may start now that `done` have finished: up to index done + concurrency, from the stored
 * sent count. The messages go before the count moves (a crash in between re-sends them next time, and a re-sent
 * run starts nothing twice); the count moves by compare-and-swap, so it never goes backwards whoever else sends.
 */
export async function sendDueRuns(d: Deps, queue: Queue, record: MatrixRecord, done: number): Promise<void> {
  const runs = runsOf(record.spec, record.cells);
  const to = Math.min(runs.length, done + record.spec.concurrency);
  for (let attempt = 0; attempt < CAS_ATTEMPTS; attempt++) {
    const read = await readSentCount(d.store, record.id);
    if (to <= read.sent) return;
    const messages: MessageSendRequest<CellMessage>[] = runs.slice(read.sent, to).map(({ cell, run }) => ({ body: { type: "cell", matrixId: record.id, cell, run }, contentType: "json" }));
    for (let i = 0; i < messages.length; i += SEND_BATCH) await queue.sendBatch(messages.slice(i, i + SEND_BATCH));
    if (await advanceSentCount(d.store, record.id, read, to)) return;
  }
  throw new SnapflowError("store_error", `matrix ${record.id}: the sent count kept changing under ${CAS_ATTEMPTS} attempts to move it to ${to}`);
}
