// Retry and timeout settings per phase, and the wrapper every phase runs in. Step names are the phase names
// (probe, archive, …): tests and `wrangler workflows instances describe` refer to them, so keep them stable.
import { NonRetryableError } from "cloudflare:workflows";
import type { WorkflowStep, WorkflowStepConfig } from "cloudflare:workers";
import { ConfigError } from "../src/config.ts";
import { PermanentError } from "../src/phase-errors.ts";
import { AgentCallError } from "../src/sandbox/agent-client.ts";
import { PartRuleError } from "../src/store/multipart-upload.ts";
import { writeProgress, type RunProgress, type StepResult } from "../src/snapshots/records.ts";

export const CLEANUP_STEP = "cleanup";

type Duration = `${number} ${"second" | "seconds" | "minute" | "minutes"}`;
const retry = (limit: number, delay: Duration, timeout: Duration): WorkflowStepConfig => ({
  retries: { limit, delay, backoff: "exponential" },
  timeout,
});

export const STEP_CONFIG: Record<string, WorkflowStepConfig> = {
  probe: retry(3, "2 seconds", "2 minutes"),
  archive: retry(2, "5 seconds", "30 minutes"),
  transfer: retry(3, "5 seconds", "60 minutes"),
  materialize: retry(2, "5 seconds", "30 minutes"),
  verify: retry(2, "5 seconds", "30 minutes"),
  record: retry(5, "1 second", "1 minute"),
  cleanup: retry(3, "2 seconds", "5 minutes"),
};

/** Runs a phase; failures a retry cannot fix become NonRetryableError so the Workflow stops at once. */
export async function phase<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    if (e instanceof PermanentError || e instanceof ConfigError || e instanceof PartRuleError || (e instanceof AgentCallError && e.permanent)) {
      throw new NonRetryableError((e as Error).message);
    }
    throw e;
  }
}

export function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/**
 * Runs named phases as steps of one Workflow run, keeping `progress.steps` and its KV copy up to date.
 * Progress writes sit outside step.do: on a replay they write the same values again, which is harmless.
 */
export function phaseRunner(step: WorkflowStep, kv: KVNamespace, progress: RunProgress) {
  return async <T extends StepResult>(name: string, fn: () => Promise<T>): Promise<T> => {
    const result = (await step.do(name, STEP_CONFIG[name]!, () => phase(fn) as Promise<never>)) as T;
    progress.steps[name] = result;
    await writeProgress(kv, progress);
    return result;
  };
}

/** Sum of the steps' own measured times. */
export const totalMs = (steps: Record<string, StepResult>) => Object.values(steps).reduce((a, r) => a + r.ms, 0);
