// Starting a matrix: write its record and progress, then send its first `concurrency` runs to the matrix queue.
// The rest follow as runs finish: the aggregator (one batch at a time) sends more so that at most `concurrency`
// runs are in flight (sendDueRuns). Idempotent: a re-sent run message finds its Workflow instance already there.
import type { Deps } from "../deps.ts";
import { putJson } from "../snapshots/records.ts";
import { matrixKeys, readProgress, writeProgress, type MatrixRecord } from "./matrix-records.ts";
import { cellsOf, runsOf, type MatrixSpec } from "./matrix-spec.ts";
import type { CellMessage } from "./messages.ts";

const SEND_BATCH = 100; // Queues' sendBatch limit

export async function startMatrix(d: Deps, queue: Queue, id: string, spec: MatrixSpec, trigger: MatrixRecord["trigger"]): Promise<MatrixRecord> {
  const cells = cellsOf(spec);
  const record: MatrixRecord = { id, spec, cells, createdAt: new Date().toISOString(), trigger };
  await putJson(d.store, matrixKeys(id).record, record);
  if (!(await readProgress(d.kv, id))) {
    await writeProgress(d.kv, {
      id, name: spec.name, trigger, status: cells.length ? "running" : "complete", total: cells.length * spec.runs, sent: 0, done: 0, failed: 0,
      deadLettered: [], createdAt: record.createdAt, updatedAt: record.createdAt,
    });
  }
  await sendDueRuns(d, queue, record, 0);
  return record;
}

/**
 * Sends the runs that may start now that `done` have finished: up to index done + concurrency, from where the last
 * call stopped. Only the aggregator (serialised) and startMatrix call it, so `sent` in KV is not raced.
 */
export async function sendDueRuns(d: Deps, queue: Queue, record: MatrixRecord, done: number): Promise<void> {
  const runs = runsOf(record.spec, record.cells);
  const progress = await readProgress(d.kv, record.id);
  const from = progress?.sent ?? 0;
  const to = Math.min(runs.length, done + record.spec.concurrency);
  if (to <= from) return;
  const messages: MessageSendRequest<CellMessage>[] = runs.slice(from, to).map(({ cell, run }) => ({ body: { type: "cell", matrixId: record.id, cell, run }, contentType: "json" }));
  for (let i = 0; i < messages.length; i += SEND_BATCH) await queue.sendBatch(messages.slice(i, i + SEND_BATCH));
  if (progress) await writeProgress(d.kv, { ...progress, sent: to, updatedAt: new Date().toISOString() });
}
