// A backup's selection (what it leaves out: excludes, gitignore, excludeCaches) as the API took it, and the agent
// client that carries it: every request of the archive and transfer phases names it, so each walk of the tree —
// tar's list, an image's exclusions, a delta's comparison, a manifest — leaves out the same entries
// (container/archive/selection.ts has the rules).
import type { SelectionSpec } from "../../container/contract/protocol.ts";
import type { Deps } from "../deps.ts";
import { AgentClient } from "../sandbox/agent-client.ts";
import type { BackupParams } from "./backup-params.ts";

/** The params' selection, or undefined when it selects everything. */
export function selectionOf(p: BackupParams): SelectionSpec | undefined {
  const s = { excludes: p.excludes ?? [], gitignore: p.gitignore ?? false, excludeCaches: p.excludeCaches ?? false };
  return s.excludes.length || s.gitignore || s.excludeCaches ? s : undefined;
}

/** The agent client of a backup's archive and transfer phases. */
export function backupAgent(d: Deps, p: BackupParams): AgentClient {
  return new AgentClient(d.transport, p.sandboxId).withSelection(selectionOf(p));
}

/** For the probe's step result: the selection's rules as compiled in the sandbox, and its warnings (git missing). */
export async function checkSelection(agent: AgentClient, p: BackupParams): Promise<{ selection?: { rules: string[]; warnings: string[] } }> {
  const s = selectionOf(p);
  if (!s) return {};
  const compiled = await agent.checkSelection(p.path, s);
  const rules = [...s.excludes.map((e) => `exclude ${e}`), ...(s.gitignore ? ["gitignore"] : []), ...(s.excludeCaches ? ["CACHEDIR.TAG"] : [])];
  return { selection: { rules, warnings: compiled.warnings } };
}
