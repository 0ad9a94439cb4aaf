// Routes of a restore's swap (tree-swap.ts): plan it (probe), swap the verified new tree in (verify), commit once
// recorded (record), roll back after a failure (cleanup), and read its journal. The Worker names only the target
// and the restore id; where the new and old trees go is the agent's to decide (swapPlaces), so a request cannot
// point a rename or a removal anywhere else.
import { realpath } from "node:fs/promises";
import { AgentError } from "../agent-error.ts";
import { readMountinfo, unmountPath } from "../mounts.ts";
import { refuseIfMounted } from "../mount-guard.ts";
import * as P from "../protocol.ts";
import { AGENT_AREA, swapJournalPath, swapPlaces } from "../sandbox-layout.ts";
import { checkSandboxPath } from "../sandbox-paths.ts";
import { sandboxRoots } from "../sandbox-roots.ts";
import { commitSwap, planSwap, readJournal, rollbackSwap, swapIn, type SwapSite } from "../tree-swap.ts";
import type { Ctx, Routes } from "./route.ts";

async function siteOf(c: Ctx, body: { target: string; id: string }): Promise<SwapSite> {
  const target = checkSandboxPath(body.target, "target");
  if (target === AGENT_AREA || target.startsWith(`${AGENT_AREA}/`)) throw new AgentError("bad_request", "target: snapflow's own area is not a restore target", "target");
  const { staged, old } = swapPlaces(target, body.id, sandboxRoots());
  const host = {
    target: await c.path(target, "target"),
    staged: await c.path(staged, "target"),
    old: await c.path(old, "target"),
    journal: await c.path(swapJournalPath(body.id), "id"),
  };
  const mountAtTarget = async () => {
    const canonical = await realpath(host.target).catch(() => null);
    return canonical && (await readMountinfo()).some((m) => m.mountPoint === canonical) ? canonical : null;
  };
  return {
    id: body.id, target, staged, old, host,
    refuseIfMounted: (hostPath, field) => refuseIfMounted(hostPath, field, c.root.hostRoot, c.agent.mounts, c.sandboxId),
    async targetMount() {
      const at = await mountAtTarget();
      if (!at) return "none";
      return c.agent.mounts.records(c.sandboxId).some((r) => r.hostPath === at) ? "snapflow" : "foreign";
    },
    unmountTarget: () => unmountPath(c.agent.mounts, c.sandboxId, host.target, target),
  };
}

export const swapRoutes: Routes = {
  "POST /v1/swap/plan": async (c) => planSwap(await siteOf(c, await c.json(P.SwapBody))),
  "POST /v1/swap/in": async (c) => swapIn(await siteOf(c, await c.json(P.SwapBody))),
  "POST /v1/swap/commit": async (c) => commitSwap(await siteOf(c, await c.json(P.SwapBody))),
  "POST /v1/swap/rollback": async (c) => rollbackSwap(await siteOf(c, await c.json(P.SwapBody))),
  "GET /v1/swap": async (c) => {
    const q = c.query(P.SwapBody);
    return (await readJournal(await c.path(swapJournalPath(q.id), "id"))) ?? { id: q.id, state: "none" };
  },
};
