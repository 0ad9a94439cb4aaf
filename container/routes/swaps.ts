// Routes of a restore's swap (tree-swap.ts): plan it (probe), swap the verified new tree in (verify; a lazy tree's
// materialize swaps in an empty directory and has the agent mount the tree there in the same call), commit once
// recorded (record), roll back after a failure (cleanup), and read its journal. The Worker names only the target
// and the restore id; where the new and old trees go is the agent's to decide (swapPlaces), so a request cannot
// point a rename or a removal anywhere else.
import type { z } from "zod";
import { AgentError } from "../http/agent-error.ts";
import * as P from "../contract/protocol.ts";
import { remountLazy } from "./chunks.ts";
import { clearPaths, layOverlay, mountImageAt } from "./images.ts";
import { swapJournalPath } from "../contract/sandbox-layout.ts";
import { swapSite } from "../extract/swap-site.ts";
import { commitSwap, planSwap, readJournal, rollbackSwap, swapIn } from "../extract/tree-swap.ts";
import type { Ctx, Routes } from "./route.ts";

const siteOf = async (c: Ctx) => swapSite(c, await c.json(P.SwapBody));

export const swapRoutes: Routes = {
  "POST /v1/swap/plan": async (c) => planSwap(await siteOf(c)),
  "POST /v1/swap/in": async (c) => {
    const body = await c.json(P.SwapInBody);
    if (body.clear) await clearPaths(c, body.clear, "clear.");
    const swapped = await swapIn(await swapSite(c, body), { mountedAfter: body.mount !== undefined });
    if (!body.mount) return swapped;
    const made = await mountAtTarget(c, body.target, body.mount).catch(underMount);
    return { ...swapped, mountAtMs: made.ms, mounted: made.mounted };
  },
  "POST /v1/swap/commit": async (c) => commitSwap(await siteOf(c)),
  "POST /v1/swap/rollback": async (c) => rollbackSwap(await siteOf(c)),
  "GET /v1/swap": async (c) => {
    const q = c.query(P.SwapBody);
    return (await readJournal(await c.path(swapJournalPath(q.id), "id"))) ?? { id: q.id, state: "none" };
  },
};

/** The tree a swap was asked to lay at its target: what POST /v1/lazy/remount, /v1/overlay or /v1/materialize would make there. */
function mountAtTarget(c: Ctx, target: string, m: z.infer<typeof P.SwapMount>): Promise<{ ms: number; mounted: P.MountEntry }> {
  if (m.kind === "lazy-image") return remountLazy(c, { work: m.work, path: target, format: m.format });
  if (m.kind === "image") return mountImageAt(c, { archive: m.archive, path: target, format: m.format, how: m.how });
  return layOverlay(c, { lower: m.lower, path: target, how: m.how, upper: m.upper, lowerMounted: true });
}

/** The mount's errors name their field inside `mount` (a 404 for `mount.work` when the helper is gone). */
function underMount(e: unknown): never {
  if (!(e instanceof AgentError) || !e.field) throw e;
  throw new AgentError(e.code, e.message.startsWith(`${e.field}:`) ? `mount.${e.message}` : e.message, `mount.${e.field}`);
}
