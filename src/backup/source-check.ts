// A backup's source, checked at the request (POST /api/backups), before any Workflow starts: a mistyped sandbox id
// or path is a 404 naming it, never a complete snapshot of nothing. One stat of the path through the agent, and
// when it is not a directory that holds something, one of the root it lies under, to tell which was mistyped:
//
//   path a directory with entries, or an empty one below its root  → a source (an empty directory is exact too)
//   the path's root (e.g. /workspace) missing or empty              → 404 `sandboxId`: the sandbox has nothing there
//   otherwise (nothing at path, a file, a symlink)                  → 404 `path`
//
// Where the sandbox runs decides what the stat costs: the host agent answers at once (and, as for any request,
// makes the sandbox's root directories); in production the call starts the sandbox's container and agent first
// when they are not running (sdk-transport.ts), within the short call deadline (AGENT_CALL_SECONDS). That start is
// not wasted: the Workflow's first step asks the same agent moments later. An agent that cannot be reached answers
// 502 agent_error at the request, which a retry of the request can cure.
import { configuredRoots } from "../../container/contract/sandbox-roots.ts";
import { SnapflowError } from "../errors.ts";
import type { AgentClient } from "../sandbox/agent-client.ts";

/** The configured root `path` lies under (the schema admitted only such paths). */
const rootOf = (path: string) => configuredRoots().find((r) => path === r || path.startsWith(`${r}/`));

export async function checkSource(agent: AgentClient, path: string): Promise<void> {
  const source = await agent.stat(path);
  const root = rootOf(path);
  if (source.exists && source.type === "dir" && ((source.entries ?? 0) > 0 || path !== root)) return;
  const atRoot = !root || root === path ? source : await agent.stat(root);
  if (!atRoot.exists || (atRoot.type === "dir" && (atRoot.entries ?? 0) === 0)) {
    throw new SnapflowError("not_found", `sandboxId: sandbox ${agent.sandboxId} has nothing under ${root ?? path}, so there is nothing to back up at ${path} (a sandbox never used, or a mistyped id?)`, { field: "sandboxId" });
  }
  const what = !source.exists ? "nothing is there" : `it is ${source.type === "dir" ? "an empty directory" : `a ${source.type}`}`;
  throw new SnapflowError("not_found", `path: ${path} in sandbox ${agent.sandboxId} is not a directory to back up: ${what}`, { field: "path" });
}
