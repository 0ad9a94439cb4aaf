// The shapes of a matrix's runs and of its summary (summary.ts builds them; summary-table.ts prints them).
import type { Cell } from "./matrix-spec.ts";
import type { stats } from "./median.ts";

/** A phase's own measurement, as the Workflows' steps return it. */
export type StepResult = { ms: number; bytes: number; [detail: string]: unknown };

export interface RunResult {
  matrixId: string;
  runKey: string;
  cell: Cell;
  run: number;
  ok: boolean;
  error?: string;
  /** time until the fresh sandbox answered its first request */
  sandboxStartMs?: number;
  backup?: { steps: Record<string, StepResult>; totalMs: number; archiveBytes: number };
  restore?: { steps: Record<string, StepResult>; totalMs: number };
  finishedAt: string;
}

export interface SummaryRow {
  cell: Cell;
  n: number;
  failures: { run: number; error: string }[];
  archiveBytes?: number;
  /**
   * "backup.total" (the steps' own work), "backup.wall" (first step's start to last step's end: the work and the
   * overhead), "backup.transfer", "restore.total", "sandbox.start", … → stats of milliseconds
   */
  phases: Record<string, ReturnType<typeof stats>>;
  /** archive MB per second of the median backup and restore transfer */
  backupMBps?: number;
  restoreMBps?: number;
}

export interface Summary {
  matrixId: string;
  name: string;
  total: number;
  done: number;
  failed: number;
  rows: SummaryRow[];
  updatedAt: string;
}

