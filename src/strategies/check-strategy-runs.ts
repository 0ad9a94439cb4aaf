// The probe's verdict on a strategy: a sandbox without a tool or capability the strategy needs fails at once, naming
// what is missing (a retry cannot install it).
import type { ProbeResult } from "../../container/contract/protocol.ts";
import { SnapflowError } from "../errors.ts";
import { unavailableReason, type Strategy } from "./registry.ts";

export function checkStrategyRuns(s: Strategy, probe: ProbeResult, sandboxId: string, transport?: "sandbox" | "local"): void {
  const reason = unavailableReason(s, probe, transport);
  if (reason) throw new SnapflowError("strategy_unavailable", `strategy ${s.name} cannot run in sandbox ${sandboxId}: ${reason}`);
}
