// What every restore plan, transfer path and materialization is handed.
import type { Deps } from "../deps.ts";
import type { AgentClient } from "../sandbox/agent-client.ts";
import type { RestoreStrategy } from "../strategies/registry.ts";
import type { RestoreParams } from "./restore-params.ts";

export interface RestoreContext {
  d: Deps;
  p: RestoreParams;
  s: RestoreStrategy;
  agent: AgentClient;
}
