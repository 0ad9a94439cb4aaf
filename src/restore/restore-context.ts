// What every restore plan, transfer path and materialization is handed.
import type { Deps } from "../deps.ts";
import type { AgentClient } from "../sandbox/agent-client.ts";
import type { RestoreStrategy } from "../strategies/registry.ts";
import type { RestoreParams, RestoreProbeResult } from "./restore-params.ts";

export interface RestoreContext {
  d: Deps;
  p: RestoreParams;
  s: RestoreStrategy;
  agent: AgentClient;
  /**
   * The probe's questions to the sandbox (its tools; whether the target may be written), asked as the probe starts,
   * beside its store reads (the lease, the record): a plan's probe takes their answers rather than asking again.
   */
  asked?: { tools: ReturnType<AgentClient["probe"]>; target: Promise<void> };
  /** The snapshot as the probe found it (its step result), for a later step that would otherwise read the record again. */
  probed?: RestoreProbeResult["snapshot"];
}
