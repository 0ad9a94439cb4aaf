// Test-only fault injection: "fail the next N requests to route R with a 503". It exists so that tests can make
// a Workflow step fail transiently through the real agent and watch the real retry, instead of mocking a step.
// Off unless the agent is started with SNAPFLOW_AGENT_FAULTS=1; the production image never sets it.
import { AgentError } from "./agent-error.ts";

export class Faults {
  private remaining = new Map<string, number>();
  arm(key: string, times: number): void {
    this.remaining.set(key, times);
  }
  /** Throws an injected fault if one is armed for this sandbox and route. */
  check(key: string): void {
    const left = this.remaining.get(key) ?? 0;
    if (left <= 0) return;
    this.remaining.set(key, left - 1);
    throw new AgentError("injected_fault", `injected fault for ${key} (${left - 1} more armed)`);
  }
}
