// Retry and timeout settings per phase, and the PhaseRunner that runs each phase as its own step.do. Step names
// come from src/phases/phase-names.ts: tests and `wrangler workflows instances describe` refer to them.
import { NonRetryableError } from "cloudflare:workflows";
import type { WorkflowStep, WorkflowStepConfig } from "cloudflare:workers";
import { errorMessage, isPermanent } from "../src/errors.ts";
import { stepName, type PhaseName } from "../src/phases/phase-names.ts";
import type { PhaseRunner } from "../src/phases/phase-runner.ts";
import type { StepResult } from "../src/snapshots/records.ts";

type Duration = `${number} ${"second" | "seconds" | "minute" | "minutes"}`;
const retry = (limit: number, delay: Duration, timeout: Duration): WorkflowStepConfig => ({
  retries: { limit, delay, backoff: "exponential" },
  timeout,
});

export const STEP_CONFIG: Record<PhaseName, WorkflowStepConfig> = {
  probe: retry(3, "2 seconds", "2 minutes"),
  archive: retry(2, "5 seconds", "30 minutes"),
  transfer: retry(3, "5 seconds", "60 minutes"),
  materialize: retry(2, "5 seconds", "30 minutes"),
  verify: retry(2, "5 seconds", "30 minutes"),
  record: retry(5, "1 second", "1 minute"),
  cleanup: retry(3, "2 seconds", "5 minutes"),
};

/**
 * Runs a step's work; failures a retry cannot fix (isPermanent) become NonRetryableError so the Workflow stops at
 * once. Whatever is thrown from here is kept by Workflows in the step's attempt records (wrangler workflows
 * instances describe shows it), so its message loses any presigned URL's signature first, retried errors too.
 */
export async function phase<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    if (isPermanent(e)) throw new NonRetryableError(errorMessage(e));
    const message = errorMessage(e);
    if (e instanceof Error && e.message !== message) {
      const redacted = new Error(message);
      redacted.name = e.name;
      throw redacted;
    }
    throw e;
  }
}

export interface StepRunnerOptions {
  /** "backup" / "restore": step names "backup probe", … (a benchmark cell runs both sequences) */
  prefix?: "backup" | "restore";
  /** after each step: best-effort progress (it must never fail the run; see reportProgress) */
  afterStep?: (steps: Record<string, StepResult>) => Promise<void>;
}

/** A PhaseRunner over a Workflow's steps: each phase one step.do, named and configured by its phase. */
export function stepRunner(step: WorkflowStep, options: StepRunnerOptions = {}): PhaseRunner {
  const steps: Record<string, StepResult> = {};
  return {
    steps,
    async run<T extends StepResult>(name: PhaseName, fn: () => Promise<T>): Promise<T> {
      // Wall-clock bounds of the attempt that succeeded: with the phase's own ms they show the run's fixed costs
      // (step scheduling, retries' waits) apart from its work (phase-runner.ts overheadMs).
      const timed = async () => {
        const startedAt = Date.now();
        const r = await phase(fn);
        return { ...r, startedAt, endedAt: Date.now() };
      };
      const result = (await step.do(stepName(name, options.prefix), STEP_CONFIG[name], timed as () => Promise<never>)) as T;
      steps[name] = result;
      await options.afterStep?.(steps);
      return result;
    },
  };
}

export { errorMessage };
export { totalMs } from "../src/phases/phase-runner.ts";
