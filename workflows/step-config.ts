// Retry and timeout settings per phase, and the PhaseRunner that runs each phase as its own step.do. Step names
// come from src/phases/phase-names.ts: tests and `wrangler workflows instances describe` refer to them.
import { NonRetryableError } from "cloudflare:workflows";
import type { WorkflowStep, WorkflowStepConfig } from "cloudflare:workers";
import { errorMessage, isPermanent } from "../src/errors.ts";
import { stepName, type PhaseName } from "../src/phases/phase-names.ts";
import type { PhaseRunner } from "../src/phases/phase-runner.ts";
import type { StepResult } from "../src/snapshots/records.ts";

type Duration = `${number} ${"second" | "seconds" | "minute" | "minutes"}`;
/** A phase's retries: `limit` more attempts, the first after `delaySeconds`, each later one after twice the last. */
const retry = (limit: number, delaySeconds: number, timeout: Duration) => ({ limit, delaySeconds, timeout });

const STEP_RETRIES: Record<PhaseName, ReturnType<typeof retry>> = {
  probe: retry(3, 2, "2 minutes"),
  archive: retry(2, 5, "30 minutes"),
  transfer: retry(3, 5, "60 minutes"),
  materialize: retry(2, 5, "30 minutes"),
  verify: retry(2, 5, "30 minutes"),
  record: retry(5, 1, "1 minute"),
  cleanup: retry(3, 2, "5 minutes"),
};

/**
 * The step settings of each phase. STEP_RETRY_DELAY_FACTOR scales every retry's wait (default 1): the test projects
 * set it to 0.2 (vitest.config.ts) so that the fault tests' failing runs, which wait out every retry, take seconds
 * rather than a minute each; what is retried, how often and the timeouts are production's.
 */
export function stepConfigs(env: object = {}): Record<PhaseName, WorkflowStepConfig> {
  // Optional and absent from wrangler.jsonc (as AGENT_IDLE_SECONDS is), so not on Env's type.
  const factor = Number((env as { STEP_RETRY_DELAY_FACTOR?: unknown }).STEP_RETRY_DELAY_FACTOR ?? 1);
  const scale = Number.isFinite(factor) && factor > 0 && factor <= 1 ? factor : 1;
  const out = {} as Record<PhaseName, WorkflowStepConfig>;
  for (const [name, r] of Object.entries(STEP_RETRIES) as [PhaseName, ReturnType<typeof retry>][]) {
    out[name] = { retries: { limit: r.limit, delay: Math.round(r.delaySeconds * 1000 * scale), backoff: "exponential" }, timeout: r.timeout };
  }
  return out;
}

/** Production's settings (no factor). */
export const STEP_CONFIG = stepConfigs();

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
  prefix?: "backup" | "restore" | "compaction";
  /** after each step: best-effort progress (it must never fail the run; see reportProgress, progressReporter) */
  afterStep?: (steps: Record<string, StepResult>) => Promise<void> | void;
  /** the step settings (stepConfigs(env)); production's by default */
  configs?: Record<PhaseName, WorkflowStepConfig>;
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
      const result = (await step.do(stepName(name, options.prefix), (options.configs ?? STEP_CONFIG)[name], timed as () => Promise<never>)) as T;
      steps[name] = result;
      await options.afterStep?.(steps);
      return result;
    },
  };
}

export { errorMessage };
export { totalMs } from "../src/phases/phase-runner.ts";
