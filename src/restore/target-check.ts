// The restore target must be empty unless the caller asked to replace it. Checked twice: at the request
// (POST /api/restores answers 409 before any Workflow starts) and again by the Workflow just before it writes, since
// the sandbox's own code may have put files there in between.
import { SnapflowError } from "../errors.ts";
import type { AgentClient } from "../sandbox/agent-client.ts";
import type { RestoreContext } from "./restore-context.ts";

/** Throws target_not_empty (naming `replace`) when `path` holds anything and replace was not asked for. */
export async function refuseNonEmptyTarget(agent: AgentClient, path: string, replace: boolean | undefined): Promise<void> {
  if (replace) return;
  const target = await agent.stat(path);
  if (target.exists && (target.type !== "dir" || (target.entries ?? 0) > 0)) {
    const holds = target.type === "dir" ? `holds ${target.entries} ${target.entries === 1 ? "entry" : "entries"}` : `is a ${target.type}`;
    throw new SnapflowError("target_not_empty", `restore target ${path} in sandbox ${agent.sandboxId} is not empty (it ${holds}); pass replace: true to overwrite it`, { field: "replace" });
  }
}

export async function checkTarget({ p, agent }: RestoreContext): Promise<void> {
  await refuseNonEmptyTarget(agent, p.path, p.replace);
}
