// Test-only fault injection, per sandbox and route: "fail the next N requests with a 503", or "lie in the next N
// answers". It exists so that tests can make a Workflow step fail transiently through the real agent and watch the
// real retry, or play a compromised agent against the real Worker and store, instead of mocking either.
// Off unless the agent is started with SNAPFLOW_AGENT_FAULTS=1; the production image never sets it.
import { AgentError } from "./agent-error.ts";

export type FaultAction = "fail" | "lie";

export class Faults {
  private remaining = new Map<string, number>();
  arm(key: string, times: number, action: FaultAction = "fail"): void {
    this.remaining.set(`${action} ${key}`, times);
  }
  /** Throws an injected fault if a failure is armed for this sandbox and route. */
  check(key: string): void {
    const left = this.take(`fail ${key}`);
    if (left !== undefined) throw new AgentError("injected_fault", `injected fault for ${key} (${left} more armed)`);
  }
  /** True (once per arming) if a lie is armed for this sandbox and route: the route then reports what it did not do. */
  lie(key: string): boolean {
    return this.take(`lie ${key}`) !== undefined;
  }
  /** Uses up one armed fault; undefined when none is left, else how many remain. */
  private take(key: string): number | undefined {
    const left = this.remaining.get(key) ?? 0;
    if (left <= 0) return undefined;
    this.remaining.set(key, left - 1);
    return left - 1;
  }
}
