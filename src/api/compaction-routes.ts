// The compaction of an overlay delta (issue 24; workflows/compact-workflow.ts), for the bench, tests and operators:
//
//   GET /api/compactions/:deltaId   {delta, id, status: none|running|complete|errored|removed, error?, steps?, compaction?}
//                                    status from the compaction's progress; `compaction`: its record, once a
//                                    chain resolves through it (the pointer names it)
import type { Deps } from "../deps.ts";
import { compactionIds } from "../compaction/compaction-params.ts";
import { compactionKey } from "../snapshots/compactions.ts";
import { getJson, readProgress, readSnapshot } from "../snapshots/records.ts";
import { json } from "./http.ts";
import { snapshotIdParam } from "./snapshot-routes.ts";

type Handler = (req: Request, env: Env, d: Deps, params: Record<string, string>) => Promise<Response>;

export const compactionRoutes: [string, string, Handler][] = [
  ["GET", "/api/compactions/:id", async (_req, _env, d, { id }) => {
    const delta = snapshotIdParam(id);
    const { compactionId } = compactionIds(delta);
    const [progress, pointer] = await Promise.all([readProgress(d.kv, compactionId), getJson<{ id?: string }>(d.store, compactionKey(delta))]);
    const compaction = pointer?.id === compactionId ? await readSnapshot(d.store, d.kv, compactionId) : null;
    // Complete but not pointed at: deleted since (a chain resolves through it no more).
    const status = compaction ? "complete" : progress?.status === "complete" ? "removed" : (progress?.status ?? "none");
    return json({ delta, id: compactionId, status, ...(progress?.error ? { error: progress.error } : {}), ...(progress ? { startedAt: progress.startedAt, steps: progress.steps } : {}), ...(compaction ? { compaction } : {}) });
  }],
];
