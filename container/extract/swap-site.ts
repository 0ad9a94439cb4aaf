// A restore's swap as the agent acts on it (tree-swap.ts SwapSite): from the target and the restore id, the places
// swapPlaces decides, resolved to host paths inside the sandbox's root, with the mount checks a swap needs. Used
// by the swap routes and by the sweeper, which finds swaps by their journals.
import { realpath } from "node:fs/promises";
import { AgentError } from "../http/agent-error.ts";
import { readMountinfo, unmountPath } from "../mounts/mounts.ts";
import { refuseIfMounted } from "../mounts/mount-guard.ts";
import type { AgentState } from "../routes/route.ts";
import { AGENT_AREA, swapJournalPath, swapPlaces } from "../contract/sandbox-layout.ts";
import { checkSandboxPath, resolveSandboxPath, type SandboxRoot } from "../system/path-confinement.ts";
import { sandboxRoots } from "../contract/sandbox-roots.ts";
import type { SwapSite } from "./tree-swap.ts";

export interface SandboxScope {
  root: SandboxRoot;
  sandboxId: string;
  agent: AgentState;
}

export async function swapSite(scope: SandboxScope, body: { target: string; id: string }): Promise<SwapSite> {
  const target = checkSandboxPath(body.target, "target");
  if (target === AGENT_AREA || target.startsWith(`${AGENT_AREA}/`)) throw new AgentError("bad_request", "target: snapflow's own area is not a restore target", "target");
  const { staged, old } = swapPlaces(target, body.id, sandboxRoots());
  const path = (value: string, field: string) => resolveSandboxPath(scope.root, value, field);
  const host = { target: await path(target, "target"), staged: await path(staged, "target"), old: await path(old, "target"), journal: await path(swapJournalPath(body.id), "id") };
  const mountAtTarget = async () => {
    const canonical = await realpath(host.target).catch(() => null);
    return canonical && (await readMountinfo()).some((m) => m.mountPoint === canonical) ? canonical : null;
  };
  return {
    id: body.id, target, staged, old, host,
    refuseIfMounted: (hostPath, field) => refuseIfMounted(hostPath, field, scope.root.hostRoot, scope.agent.mounts, scope.sandboxId),
    async targetMount() {
      const at = await mountAtTarget();
      if (!at) return "none";
      return scope.agent.mounts.records(scope.sandboxId).some((r) => r.hostPath === at) ? "snapflow" : "foreign";
    },
    unmountTarget: () => unmountPath(scope.agent.mounts, scope.sandboxId, host.target, target),
  };
}
