// Routes of a restore's swap (tree-swap.ts): plan it (probe), swap the verified new tree in (verify), commit once
// recorded (record), roll back after a failure (cleanup), and read its journal. The Worker names only the target
// and the restore id; where the new and old trees go is the agent's to decide (swapPlaces), so a request cannot
// point a rename or a removal anywhere else.
import * as P from "../protocol.ts";
import { swapJournalPath } from "../sandbox-layout.ts";
import { swapSite } from "../swap-site.ts";
import { commitSwap, planSwap, readJournal, rollbackSwap, swapIn } from "../tree-swap.ts";
import type { Ctx, Routes } from "./route.ts";

const siteOf = async (c: Ctx) => swapSite(c, await c.json(P.SwapBody));

export const swapRoutes: Routes = {
  "POST /v1/swap/plan": async (c) => planSwap(await siteOf(c)),
  "POST /v1/swap/in": async (c) => {
    const body = await c.json(P.SwapInBody);
    return swapIn(await swapSite(c, body), { mountedAfter: body.mountedAfter });
  },
  "POST /v1/swap/commit": async (c) => commitSwap(await siteOf(c)),
  "POST /v1/swap/rollback": async (c) => rollbackSwap(await siteOf(c)),
  "GET /v1/swap": async (c) => {
    const q = c.query(P.SwapBody);
    return (await readJournal(await c.path(swapJournalPath(q.id), "id"))) ?? { id: q.id, state: "none" };
  },
};
