// One matrix's progress, read from the store, which is its source of truth: done and failed from the stored run
// results, sent from the compare-and-swapped count, dead letters from their own objects. Whatever wrote them and
// in whatever order, a read after a write sees it (the store is strongly consistent; KV is not). GET
// /api/matrices/:id, the results page and the CLI's status read this; KV keeps a cache of it for listing.
import type { Deps } from "../deps.ts";
import { readDeadLetters, type DeadLetter } from "./dead-letters.ts";
import { readMatrix, readRuns, type MatrixProgress, type MatrixRecord } from "./matrix-records.ts";
import { readSentCount } from "./sent-count.ts";
import type { RunResult } from "./summary.ts";

/** Pure: the progress of a matrix from what the store holds. */
export function progressOf(record: MatrixRecord, runs: RunResult[], dead: DeadLetter[], sent: number): MatrixProgress {
  const total = record.cells.length * record.spec.runs;
  const done = runs.length;
  const times = [record.createdAt, ...runs.map((r) => r.finishedAt), ...dead.map((l) => l.at)].sort();
  return {
    id: record.id, name: record.spec.name, trigger: record.trigger,
    status: done >= total ? "complete" : "running",
    total, sent, done,
    failed: runs.filter((r) => !r.ok).length,
    deadLettered: dead.map((l) => ({ reason: l.reason, message: l.message })),
    createdAt: record.createdAt,
    updatedAt: times[times.length - 1]!,
  };
}

/** The progress of one matrix from the store; null when it has no record. `runs` saves a second read when known. */
export async function readMatrixStatus(d: Deps, matrixId: string, known?: { record: MatrixRecord; runs: RunResult[] }): Promise<MatrixProgress | null> {
  const record = known?.record ?? (await readMatrix(d.store, matrixId));
  if (!record) return null;
  const [runs, dead, sent] = await Promise.all([known?.runs ?? readRuns(d.store, matrixId), readDeadLetters(d, matrixId), readSentCount(d.store, matrixId)]);
  return progressOf(record, runs, dead, sent.sent);
}
