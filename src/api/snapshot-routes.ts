// The snapshot lifecycle's routes: list (filtered, paged), read, delete, and retention policies. routes.ts
// includes them in its table.
//
//   GET    /api/snapshots?sandboxId=&path=&label=k=v&since=&until=&name=&limit=&cursor=
//   GET    /api/snapshots/:id                one snapshot's record (from the store)
//   DELETE /api/snapshots/:id[?cascade=true] its objects and index entry; 409 while deltas build on it or a
//                                            restore reads it (body {cascade: true} works too)
//   PUT    /api/policies?sandboxId=&path=    {keepLast?, keepDaily?, keepWeekly?} → the policy
//   GET    /api/policies?sandboxId=&path=    one policy; without path: a sandbox's, without both: all
//   DELETE /api/policies?sandboxId=&path=    remove a policy (its snapshots are then kept)
//   GET    /api/retention                    the last retention run: what was kept and why, what was removed
//   POST   /api/chunks/gc                    {graceSeconds?, dryRun?}: collect chunks no index references and
//                                            older than the grace period (also hourly, with the default grace)
import { z } from "zod";
import { SANDBOX_ID, SandboxPath } from "../../container/contract/protocol.ts";
import type { Deps } from "../deps.ts";
import { SnapflowError } from "../errors.ts";
import { collectStore } from "../chunks/collect-store.ts";
import { deleteSnapshot } from "../snapshots/delete-snapshot.ts";
import { listSnapshots, parseListQuery } from "../snapshots/list-snapshots.ts";
import { deletePolicy, getPolicy, KeepRulesBody, listPolicies, putPolicy } from "../snapshots/policies.ts";
import { readSnapshot } from "../snapshots/records.ts";
import { latestRetention } from "../snapshots/retention.ts";
import { json, parseBody } from "./http.ts";
import { RUN_ID } from "./schemas.ts";

type Handler = (req: Request, env: Env, d: Deps, params: Record<string, string>) => Promise<Response>;

export function snapshotIdParam(value: string | undefined): string {
  const r = RUN_ID.safeParse(value);
  if (!r.success) throw new SnapflowError("bad_request", `id: ${r.error.issues[0]!.message}`, { field: "id" });
  return r.data;
}

function queryParam<T extends z.ZodType>(url: URL, name: string, schema: T, required: boolean): z.infer<T> | undefined {
  const value = url.searchParams.get(name);
  if (value === null) {
    if (required) throw new SnapflowError("bad_request", `${name}: required (?${name}=…)`, { field: name });
    return undefined;
  }
  const r = schema.safeParse(value);
  if (!r.success) throw new SnapflowError("bad_request", `${name}: ${r.error.issues[0]!.message}`, { field: name });
  return r.data;
}

const CascadeBody = z.object({ cascade: z.boolean().default(false) }).strict();

const ChunkGcBody = z.object({
  /** chunks written less than this long ago are kept whatever references them (default a day: chunk-gc.ts) */
  graceSeconds: z.number().int("whole seconds").min(0).max(30 * 24 * 3600).optional(),
  dryRun: z.boolean().default(false),
}).strict();

/** cascade from ?cascade=true or a JSON body {cascade: true}. */
async function cascadeOf(req: Request): Promise<boolean> {
  const q = queryParam(new URL(req.url), "cascade", z.enum(["true", "false"]), false);
  if (q !== undefined) return q === "true";
  const text = await req.clone().text();
  return text.trim() ? (await parseBody(req, CascadeBody)).cascade : false;
}

function policyTarget(req: Request): { sandboxId: string; path: string } {
  const url = new URL(req.url);
  return { sandboxId: queryParam(url, "sandboxId", SANDBOX_ID, true)!, path: queryParam(url, "path", SandboxPath, true)! };
}

export const snapshotRoutes: [string, string, Handler][] = [
  ["GET", "/api/snapshots", async (req, _env, d) => {
    const { filter, limit, cursor } = parseListQuery(new URL(req.url).searchParams);
    return json(await listSnapshots(d.kv, filter, { limit, cursor }));
  }],

  ["GET", "/api/snapshots/:id", async (_req, _env, d, { id }) => {
    const snapshot = await readSnapshot(d.store, d.kv, snapshotIdParam(id));
    if (!snapshot) throw new SnapflowError("not_found", `snapshot ${id} does not exist (or did not complete)`, { field: "id" });
    return json(snapshot);
  }],

  ["DELETE", "/api/snapshots/:id", async (req, _env, d, { id }) => {
    const snapshotId = snapshotIdParam(id);
    return json(await deleteSnapshot(d, snapshotId, { cascade: await cascadeOf(req) }));
  }],

  ["PUT", "/api/policies", async (req, _env, d) => {
    const target = policyTarget(req);
    const rules = await parseBody(req, KeepRulesBody);
    const policy = { ...target, ...rules, updatedAt: new Date().toISOString() };
    await putPolicy(d.store, policy);
    return json(policy);
  }],

  ["GET", "/api/policies", async (req, _env, d) => {
    const url = new URL(req.url);
    const sandboxId = queryParam(url, "sandboxId", SANDBOX_ID, false);
    const path = queryParam(url, "path", SandboxPath, false);
    if (path === undefined) return json({ policies: await listPolicies(d.store, sandboxId) });
    if (sandboxId === undefined) throw new SnapflowError("bad_request", "sandboxId: required with path", { field: "sandboxId" });
    const policy = await getPolicy(d.store, sandboxId, path);
    if (!policy) throw new SnapflowError("not_found", `no policy for ${sandboxId}:${path} (its snapshots are kept until deleted or expired)`, { field: "path" });
    return json(policy);
  }],

  ["DELETE", "/api/policies", async (req, _env, d) => {
    const { sandboxId, path } = policyTarget(req);
    if (!(await deletePolicy(d.store, sandboxId, path))) throw new SnapflowError("not_found", `no policy for ${sandboxId}:${path}`, { field: "path" });
    return json({ sandboxId, path, deleted: true });
  }],

  ["POST", "/api/chunks/gc", async (req, _env, d) => {
    const body = (await req.clone().text()).trim() ? await parseBody(req, ChunkGcBody) : ChunkGcBody.parse({});
    // Image chunks and the file-level format's packs: both are shared objects only the collectors delete.
    const { chunks, packs } = await collectStore(d, body);
    return json({ ...chunks, packs });
  }],

  ["GET", "/api/retention", async (_req, _env, d) => {
    const report = await latestRetention(d.kv);
    if (!report) throw new SnapflowError("not_found", "retention has not run yet (the cron trigger runs it hourly)");
    return json(report);
  }],
];
