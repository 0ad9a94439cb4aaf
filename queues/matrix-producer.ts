// Starting a matrix: write its record and progress, then one message per run of every cell to the matrix queue.
// Idempotent for a given id: starting it again re-sends the same messages, and the cell consumer's instance ids
// make the duplicates no-ops.
import { cellsOf, runKey, type MatrixSpec } from "../src/matrix/matrix-spec.ts";
import { matrixKeys, readProgress, writeProgress, type MatrixRecord } from "../src/matrix/matrix-records.ts";
import { putJson } from "../src/snapshots/records.ts";
import type { Deps } from "../src/deps.ts";
import type { CellMessage } from "./messages.ts";

const SEND_BATCH = 100; // Queues' sendBatch limit

export async function startMatrix(d: Deps, queue: Queue, id: string, spec: MatrixSpec, trigger: MatrixRecord["trigger"]): Promise<MatrixRecord> {
  const cells = cellsOf(spec);
  const record: MatrixRecord = { id, spec, cells, createdAt: new Date().toISOString(), trigger };
  await putJson(d.store, matrixKeys(id).record, record);
  if (!(await readProgress(d.kv, id))) {
    await writeProgress(d.kv, {
      id, name: spec.name, trigger, status: cells.length ? "running" : "complete", total: cells.length * spec.runs, done: 0, failed: 0,
      deadLettered: [], createdAt: record.createdAt, updatedAt: record.createdAt,
    });
  }
  const messages: MessageSendRequest<CellMessage>[] = [];
  for (const cell of cells) {
    for (let run = 1; run <= spec.runs; run++) messages.push({ body: { type: "cell", matrixId: id, cell, run }, contentType: "json" });
  }
  for (let i = 0; i < messages.length; i += SEND_BATCH) await queue.sendBatch(messages.slice(i, i + SEND_BATCH));
  return record;
}

export { runKey };
