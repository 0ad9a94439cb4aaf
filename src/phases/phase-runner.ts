// The seam between the phase sequences (run-backup.ts, run-restore.ts) and whatever runs them: a Workflow gives
// each phase its own step.do with retries and a timeout (workflows/); the sequence itself knows nothing of steps.
import type { StepResult } from "./step-result.ts";
import type { PhaseName } from "./phase-names.ts";

export interface PhaseRunner {
  /** the results of the phases completed so far, by phase name */
  readonly steps: Record<string, StepResult>;
  /** runs one phase (durably, retried as configured) and records its result in `steps` */
  run<T extends StepResult>(phase: PhaseName, fn: () => Promise<T>): Promise<T>;
}

/** Sum of the steps' own measured times. */
export const totalMs = (steps: Record<string, StepResult>) => Object.values(steps).reduce((a, r) => a + r.ms, 0);

/**
 * From the first step's start to the last step's end (wall clock, as the steps recorded it), and the part of it
 * that no phase measured as its own work: step scheduling, waits between steps, retried attempts.
 */
export function wallAndOverhead(steps: Record<string, StepResult>): { wallMs?: number; overheadMs?: number } {
  const timed = Object.values(steps).filter((s): s is StepResult & { startedAt: number; endedAt: number } => typeof s.startedAt === "number" && typeof s.endedAt === "number");
  if (!timed.length) return {};
  const wallMs = Math.max(...timed.map((s) => s.endedAt)) - Math.min(...timed.map((s) => s.startedAt));
  return { wallMs, overheadMs: Math.max(0, wallMs - totalMs(steps)) };
}

export const since = (t: number) => Math.round(performance.now() - t);
