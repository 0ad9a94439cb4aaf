// Failures a retry cannot fix. Phases throw PermanentError (or an agent 4xx); the Workflow step wrapper turns
// both into NonRetryableError so the Workflow fails at once with the message instead of retrying.
import type { ProbeResult } from "../container/protocol.ts";
import { unavailableReason, type Strategy } from "./strategies/registry.ts";

export class PermanentError extends Error {}

export function checkStrategyRuns(s: Strategy, probe: ProbeResult, sandboxId: string): void {
  const reason = unavailableReason(s, probe);
  if (reason) throw new PermanentError(`strategy ${s.name} cannot run in sandbox ${sandboxId}: ${reason}`);
}
