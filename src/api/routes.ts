// The HTTP API. Every /api route needs the bearer token; bodies are validated with zod (schemas.ts).
//
//   GET    /healthz                          liveness (no token)
//   GET    /api/strategies                   the registry, the defaults marked (default-restore.ts)
//   POST   /api/sandboxes/:id/datasets       generate a deterministic dataset in a sandbox
//   DELETE /api/sandboxes/:id                end a sandbox
//   GET    /api/sandboxes/:id/mounts         mounts made by restores (images, overlays)
//   DELETE /api/sandboxes/:id/mounts?path=   unmount (overlays on top of it first)
//   POST   /api/backups                      start a BackupWorkflow → {id} (404 first when there is no source directory)
//   GET    /api/backups/:id[?wait=N[&until=end]]  its status and per-step timings (and `interrupted`: what the
//                                            watchdog did); wait: held up to N s (≤ 30) until a step more or the run
//                                            ends (a long poll); until=end: only when the run ends
//   POST   /api/restores                     start a RestoreWorkflow → {id} (409 first when the target holds files, no replace)
//   GET    /api/restores/:id[?wait=N]
//   POST   /api/runs/:id/cancel              stop a backup or restore and run its cleanup (runs/cancel-run.ts); 404
//                                            for an unknown id, 409 run_ended for one that has ended
//   POST   /api/matrices                     start a benchmark matrix → {id}
//   GET    /api/matrices                     history
//   GET    /api/matrices/:id                 spec, cells, progress, summary
//   POST   /api/matrices/:id/summary         rebuild the summary from the stored runs
//   POST   /api/matrices/:id/link            a signed, read-only, expiring link to the results page → {url, expiresAt}
//   GET    /matrices/:id?exp=&sig=           the results page (table + chart, refreshes while running)
//   GET    /api/snapshots                    good snapshots, filtered and paged   } snapshot-routes.ts: the
//   GET    /api/snapshots/:id                one snapshot's record                } snapshot lifecycle
//   POST   /api/doctor                       check this deployment end to end → {ok, checks: [{check, ok, detail, ifMissing}]}
import { tenantOf } from "../snapshots/tenant.ts";
import { z } from "zod";
import { SANDBOX_ID, SandboxPath } from "../../container/contract/protocol.ts";
import type { BackupParams } from "../backup/backup-params.ts";
import { checkSource } from "../backup/source-check.ts";
import { depsFrom, type Deps } from "../deps.ts";
import { asSnapflowError, SnapflowError, type ErrorCode } from "../errors.ts";
import { newId, newMatrixId } from "../ids.ts";
import { aggregateMatrix } from "../matrix/aggregate.ts";
import { listMatrices, readMatrix, readRuns, readSummary } from "../matrix/matrix-records.ts";
import { readMatrixStatus } from "../matrix/matrix-status.ts";
import { MatrixSpec } from "../matrix/matrix-spec.ts";
import { buildSummary } from "../matrix/summary.ts";
import { startMatrix } from "../matrix/schedule.ts";
import { AgentCallError, AgentClient } from "../sandbox/agent-client.ts";
import { cancelRun } from "../runs/cancel-run.ts";
import { startRunUnderLease } from "../runs/start-run.ts";
import { releaseLease, takeLease } from "../snapshots/restore-leases.ts";
import { startRestoreRun } from "./start-restore.ts";
import { describeInterruption, readInterruptions } from "../runs/interruptions.ts";
import { readProgress, readSnapshot } from "../snapshots/records.ts";
import { totalMs, wallAndOverhead } from "../phases/phase-runner.ts";
import { chainOver, isChainBase } from "../snapshots/overlay-chain.ts";
import { runDoctor } from "../doctor/doctor.ts";
import { findBackup, formatName, STRATEGIES, unavailableReason } from "../strategies/registry.ts";
import { defaultMarks } from "./default-restore.ts";
import { checkBearer, json, parseBody } from "./http.ts";
import { checkResultsLink, RESULTS_LINK_TTL_SECONDS, resultsPageHeaders, signResultsLink } from "./results-link.ts";
import { resultsPage } from "./results-page.ts";
import { snapshotRoutes } from "./snapshot-routes.ts";
import { compactionRoutes } from "./compaction-routes.ts";
import { BackupRequest, DatasetRequest, RestoreRequest, RUN_ID } from "./schemas.ts";

type Handler = (req: Request, env: Env, d: Deps, params: Record<string, string>) => Promise<Response>;

const MATRIX_ID = z.string().regex(/^[a-z0-9][a-z0-9-]{0,80}$/, "not a matrix id");

/** An API refusal: the message says what is wrong and, with a field, which part of the request. */
function apiError(code: ErrorCode, message: string, field?: string): SnapflowError {
  return new SnapflowError(code, message, { field });
}

function idParam(value: string | undefined, schema: z.ZodType<string>, field: string): string {
  const r = schema.safeParse(value);
  if (!r.success) throw apiError("bad_request", `${field}: ${r.error.issues[0]!.message}`, field);
  return r.data;
}

function pickTimes(output: unknown): { totalMs?: number; wallMs?: number; overheadMs?: number } {
  const o = (output ?? {}) as { totalMs?: number; wallMs?: number; overheadMs?: number };
  return { totalMs: o.totalMs, wallMs: o.wallMs, overheadMs: o.overheadMs };
}

async function interruptionsOf(kv: KVNamespace, id: string): Promise<{ interrupted?: string[] }> {
  const notes = await readInterruptions(kv, id);
  return notes.length ? { interrupted: notes.filter((n) => n.action !== "pausing" || n === notes.at(-1)).map(describeInterruption) } : {};
}

/** `?wait=`: seconds a status request may hold its answer until the run ends (a long poll); at most this many. */
export const MAX_STATUS_WAIT_SECONDS = 30;
const STATUS_WAIT = z.coerce.number().min(0, "seconds, 0 or more").max(MAX_STATUS_WAIT_SECONDS, `at most ${MAX_STATUS_WAIT_SECONDS} seconds`);
const ENDED = new Set(["complete", "errored", "terminated", "cancelled"]);
/** How often a waiting status request looks again: what an answer can lag the run's end by. */
const STATUS_WAIT_STEP_MS = 20;
/** A waiting request asks the Workflow itself at least this often, whatever its progress record says. */
const STATUS_WAIT_FULL_EVERY = 25;

/**
 * A run's status; with `?wait=N`, held until the run ends, a step more has ended, or N seconds have passed: a client
 * learns of each within ~20 ms with one request instead of polling (the CLI and the benches polled every 100–300 ms,
 * so a run's wall time was read up to that late). While it waits it reads only the run's progress record (one KV
 * read, written after every step and at the end), and asks the Workflow's instance (what a status costs: ~20 ms of
 * workerd's CPU here, docs/benchmarks.md) only when that record changed, says the run is no longer running, or every
 * STATUS_WAIT_FULL_EVERY looks: asking it every 20 ms would take the CPU the run it watches needs.
 */
async function runStatus(req: Request, workflow: Workflow, kv: KVNamespace, id: string): Promise<Response> {
  const waitParam = new URL(req.url).searchParams.get("wait");
  const wait = waitParam === null ? 0 : STATUS_WAIT.safeParse(waitParam);
  if (typeof wait !== "number" && !wait.success) throw apiError("bad_request", `wait: ${wait.error.issues[0]!.message}`, "wait");
  const until = new URL(req.url).searchParams.get("until");
  if (until !== null && until !== "end") throw apiError("bad_request", `until: only "end" (not '${until}')`, "until");
  // until=end: a client that wants only the end (a bench timing the run) is not answered at each step, and the
  // Workflow's instance is not asked at each step either: each ask costs workerd CPU the run it watches needs.
  const eachStep = until === null;
  const seconds = typeof wait === "number" ? wait : wait.data;
  const waits = seconds > 0;
  const deadline = Date.now() + seconds * 1000;
  const stepsOf = (x: Record<string, unknown>) => Object.keys((x.steps as object | undefined) ?? {}).length;
  let steps: number | undefined;
  let seen: string | undefined;
  for (let look = 0; ; look++) {
    const progress = look === 0 ? null : await readProgress(kv, id);
    const now = progress ? `${progress.status} ${Object.keys(progress.steps).length}` : undefined;
    const full = look % STATUS_WAIT_FULL_EVERY === 0 || !progress || progress.status !== "running" || (eachStep && now !== seen) || Date.now() >= deadline;
    seen = now;
    if (full) {
      const status = await statusOf(workflow, kv, id, waits);
      if (ENDED.has(String(status.status)) || Date.now() >= deadline || (eachStep && steps !== undefined && stepsOf(status) !== steps)) return json(status);
      steps = stepsOf(status);
    }
    await scheduler.wait(STATUS_WAIT_STEP_MS);
  }
}

/**
 * `finalFromRecord` (a waiting request): a run writes "complete" once its outcome is final (recorded, its path free);
 * what its Workflow does after that (start a background content check or a compaction) cannot undo it. A client
 * waiting for the end is answered from that record alone, without the run's tail or the instance's status (~20 ms
 * of workerd's CPU). A plain GET asks the instance, as every status of a running run does: the peers race, which
 * polls, prices a poll on a completed run as one during it (scripts/bench/peers/model.ts Polling).
 */
async function statusOf(workflow: Workflow, kv: KVNamespace, id: string, finalFromRecord: boolean): Promise<Record<string, unknown>> {
  const progress = await readProgress(kv, id);
  if (finalFromRecord && progress?.status === "complete") {
    const { error: _none, ...done } = progress;
    return { ...done, ...(await interruptionsOf(kv, id)), totalMs: totalMs(progress.steps), ...wallAndOverhead(progress.steps) };
  }
  let instance: WorkflowInstance;
  try {
    instance = await workflow.get(id);
  } catch {
    if (!progress) throw apiError("not_found", `no run with id ${id}`, "id");
    return { ...progress, ...(await interruptionsOf(kv, id)) };
  }
  const status = await instance.status();
  return {
    id,
    // The engine says "terminated"; a run stopped by a cancel, its cleanup done, says what happened to it.
    status: progress?.status === "cancelled" ? "cancelled" : status.status,
    kind: progress?.kind,
    strategy: progress?.strategy,
    snapshotId: progress?.snapshotId,
    ...(progress?.endedAt ? { startedAt: progress.startedAt, endedAt: progress.endedAt } : {}),
    steps: progress?.steps ?? {},
    // Our own message (what failed and why) is more useful than the engine's "a step threw" summary.
    error: progress?.error ?? status.error?.message,
    // A run the watchdog found interrupted (a stack restart, a stall) says so, and what was done about it.
    ...(await interruptionsOf(kv, id)),
    // Σ of the phases' own work; wall clock from the first step to the last; the difference (scheduling, retries).
    ...pickTimes(status.output),
  };
}

const routes: [string, string, Handler][] = [
  // 200 whatever the verdict: the report is the answer (ok says whether every check passed).
  ["POST", "/api/doctor", async (_req, env, d) => json(await runDoctor(env, d))],

  ["GET", "/api/strategies", async (req, _env, d) => {
    // With ?sandboxId=…, probe that sandbox and say which strategies can run there, and why not.
    const sandboxParam = new URL(req.url).searchParams.get("sandboxId");
    const probe = sandboxParam === null ? undefined : await new AgentClient(d.transport, idParam(sandboxParam, SANDBOX_ID, "sandboxId")).probe();
    // What runs when a request names no strategy: the default backup, and each format's default restore.
    const marks = defaultMarks();
    return json({
      ...(probe ? { sandboxId: sandboxParam, probe: { kernel: probe.kernel, fuse: probe.fuse, capSysAdmin: probe.capSysAdmin, cpus: probe.cpus } } : {}),
      strategies: STRATEGIES.map((s) => {
        const reason = probe ? unavailableReason(s, probe, d.transport.kind) : undefined;
        return { ...s, ...marks.get(s.name), ...(probe ? { available: !reason, ...(reason ? { reason } : {}) } : {}) };
      }),
    });
  }],

  ["POST", "/api/sandboxes/:id/datasets", async (req, _env, d, { id }) => {
    const sandboxId = idParam(id, SANDBOX_ID, "sandboxId");
    const body = await parseBody(req, DatasetRequest);
    return json({ sandboxId, ...body, ...(await new AgentClient(d.transport, sandboxId).generateDataset(body)) }, 201);
  }],

  ["DELETE", "/api/sandboxes/:id", async (_req, _env, d, { id }) => {
    const sandboxId = idParam(id, SANDBOX_ID, "sandboxId");
    await d.transport.destroy(sandboxId);
    return json({ sandboxId, destroyed: true });
  }],

  ["GET", "/api/sandboxes/:id/mounts", async (_req, _env, d, { id }) => {
    const sandboxId = idParam(id, SANDBOX_ID, "sandboxId");
    return json({ sandboxId, ...(await new AgentClient(d.transport, sandboxId).mounts()) });
  }],

  ["DELETE", "/api/sandboxes/:id/mounts", async (req, _env, d, { id }) => {
    const sandboxId = idParam(id, SANDBOX_ID, "sandboxId");
    const path = SandboxPath.safeParse(new URL(req.url).searchParams.get("path") ?? "");
    if (!path.success) throw apiError("bad_request", `path: ${path.error.issues[0]!.message}`, "path");
    return json({ sandboxId, ...(await new AgentClient(d.transport, sandboxId).unmount(path.data)) });
  }],

  ["POST", "/api/backups", async (req, env, d) => {
    const arrived = new Date().toISOString(); // the run's clock starts here, its base's read included
    const body = await parseBody(req, BackupRequest);
    // The schema admitted only backup preset names.
    const strategy = findBackup(body.strategy)!;
    if (strategy.delta && !body.baseSnapshotId) throw apiError("bad_request", `baseSnapshotId: ${strategy.name} is a delta; name the snapshot it is taken against`, "baseSnapshotId");
    // A file-level backup takes it as its parent (whose chunk lists it reuses; files-parent.ts): still a whole snapshot.
    const takesParent = strategy.format.kind === "files";
    if (!strategy.delta && !takesParent && body.baseSnapshotId) throw apiError("bad_request", `baseSnapshotId: ${strategy.name} makes full snapshots; use a delta strategy (e.g. tar-zst-delta)`, "baseSnapshotId");
    let base = body.baseSnapshotId ? await readSnapshot(d.store, d.kv, body.baseSnapshotId) : null;
    // A delta builds on its base's chunks (a fork restores the base lazily) and reads its manifest: a base of another
    // tenant is answered as one that does not exist, like a restore of another tenant's snapshot below.
    if (base && tenantOf(base) !== body.tenant) base = null;
    if (body.baseSnapshotId && !base) throw apiError("not_found", `base snapshot ${body.baseSnapshotId} does not exist (or did not complete)`, "baseSnapshotId");
    if (takesParent && base && base.format.kind !== "files") throw apiError("bad_request", `baseSnapshotId: ${strategy.name}'s parent must be a file-level snapshot; ${base.id} is ${formatName(base.format)}`, "baseSnapshotId");
    if (strategy.delta === "overlay-upper" && base?.delta?.kind === "overlay-upper") {
      // A sleep of a workspace woken from an overlay delta: the wake laid the delta's chain read-only under an empty
      // upper, so this delta is what changed since, over the named one. Every link is checked, and the depth bounded.
      await chainOver(d, base, "baseSnapshotId");
    }
    if (strategy.delta === "changed-files" && base?.delta?.kind === "overlay-upper") {
      // Its manifest is a layer over its base image's, and a chain of tar layers cannot end in an image.
      throw apiError("bad_request", `baseSnapshotId: ${base.id} is an overlay delta; a changed-files delta builds on a tar snapshot (take the fork's next delta with overlay-delta)`, "baseSnapshotId");
    }
    if (strategy.delta === "overlay-upper" && base && !base.delta && !isChainBase(base.format)) {
      throw apiError("bad_request", `baseSnapshotId: an overlay delta sits on a squashfs image or a file-level snapshot; ${base.id} is ${formatName(base.format)}`, "baseSnapshotId");
    }
    const id = newId("bk");
    const params: BackupParams = { snapshotId: id, ...body, startedAt: arrived };
    // A mistyped sandbox id or path is refused (404, naming it) rather than recorded as a snapshot of nothing.
    await startRunUnderLease(env, d, "backup", id, { sandboxId: params.sandboxId, path: params.path }, params, () => checkSource(new AgentClient(d.transport, body.sandboxId), body.path));
    return json({ id, snapshotId: id, status: "queued", strategy: body.strategy }, 202, { location: `/api/backups/${id}` });
  }],

  ["GET", "/api/backups/:id", async (req, env, d, { id }) => runStatus(req, env.BACKUP_WORKFLOW, d.kv, idParam(id, RUN_ID, "id"))],

  ["POST", "/api/restores", async (req, env, d) => {
    // The run's clock starts as the request arrives: a wake's usableMs counts this request's own reads and leases.
    const arrived = new Date().toISOString();
    const body = await parseBody(req, RestoreRequest);
    const found = await readSnapshot(d.store, d.kv, body.snapshotId);
    // Another tenant's snapshot is answered exactly as a missing one: the restore would read that tenant's chunks
    // (lazy.ts signs them under the snapshot's own tenant), and a different answer (403, say) would confirm to the
    // caller that the id exists. Snapshots from before tenants are the default tenant's.
    const snapshot = found && tenantOf(found) === body.tenant ? found : null;
    if (!snapshot) throw apiError("not_found", `snapshot ${body.snapshotId} does not exist (or did not complete)`, "snapshotId");
    // The restore's lease on the snapshot (restore-leases.ts), taken now, beside this request's other checks, rather
    // than first thing in the probe: a wake waits for the probe. Only once the snapshot is known to be the caller's
    // (a lease on another tenant's would hold up its deletes); released if the run is not started.
    const id = newId("rs");
    const lease = takeLease(d.store, body.snapshotId, id);
    lease.catch(() => {});
    try {
      return await startRestoreRun(env, d, body, snapshot, id, lease, arrived);
    } catch (e) {
      await lease.then(() => releaseLease(d.store, body.snapshotId, id), () => {}).catch(() => {});
      throw e;
    }
  }],

  ["GET", "/api/restores/:id", async (req, env, d, { id }) => runStatus(req, env.RESTORE_WORKFLOW, d.kv, idParam(id, RUN_ID, "id"))],

  ["POST", "/api/runs/:id/cancel", async (req, env, d, { id }) => {
    const runId = idParam(id, RUN_ID, "id");
    // No options yet: an empty body (or none) only, so that a later option is not silently ignored by an old Worker.
    const text = await req.text();
    if (text.trim() && text.trim() !== "{}") await parseBody(new Request(req.url, { method: "POST", body: text }), z.object({}).strict());
    return json(await cancelRun(env, d, runId));
  }],

  ["POST", "/api/matrices", async (req, env, d) => {
    const spec = await parseBody(req, MatrixSpec);
    const id = newMatrixId();
    const record = await startMatrix(d, env.MATRIX_QUEUE, id, spec, "http");
    return json({ id, cells: record.cells.length, runs: record.cells.length * spec.runs, status: "running" }, 202, { location: `/api/matrices/${id}` });
  }],

  ["GET", "/api/matrices", async (req, _env, d) => json(await listMatrices(d.kv, new URL(req.url).searchParams.get("cursor") ?? undefined))],

  ["GET", "/api/matrices/:id", async (_req, _env, d, { id }) => {
    const matrixId = idParam(id, MATRIX_ID, "id");
    // The store, not KV: what any consumer wrote is in the answer (matrix-status.ts).
    // The summary is built from the same stored runs, so it agrees with the progress (summary.json may lag a moment).
    const [record, runs] = await Promise.all([readMatrix(d.store, matrixId), readRuns(d.store, matrixId)]);
    if (!record) throw apiError("not_found", `no matrix with id ${matrixId}`, "id");
    const progress = await readMatrixStatus(d, matrixId, { record, runs });
    const summary = buildSummary(matrixId, record.spec.name, record.cells, record.spec.runs, runs);
    return json({ id: matrixId, spec: record.spec, cells: record.cells, progress, summary });
  }],

  ["POST", "/api/matrices/:id/summary", async (_req, env, d, { id }) => {
    // Summaries are derived from the stored runs: rebuild one (after changing the aggregator, say).
    const matrixId = idParam(id, MATRIX_ID, "id");
    if (!(await readMatrix(d.store, matrixId))) throw apiError("not_found", `no matrix with id ${matrixId}`, "id");
    await aggregateMatrix(d, env.MATRIX_QUEUE, matrixId);
    return json(await readSummary(d.store, matrixId));
  }],

  ["POST", "/api/matrices/:id/link", async (req, _env, d, { id }) => {
    const matrixId = idParam(id, MATRIX_ID, "id");
    const body = await parseBody(req, z.object({ ttlSeconds: z.number().int().min(60).max(RESULTS_LINK_TTL_SECONDS.max).default(RESULTS_LINK_TTL_SECONDS.default) }).strict());
    if (!(await readMatrix(d.store, matrixId))) throw apiError("not_found", `no matrix with id ${matrixId}`, "id");
    const exp = Math.floor(Date.now() / 1000) + body.ttlSeconds;
    const path = await signResultsLink(d.config.API_TOKEN, matrixId, exp);
    return json({ url: new URL(path, req.url).href, expiresAt: new Date(exp * 1000).toISOString() }, 201);
  }],

  ...snapshotRoutes,
  ...compactionRoutes,
];

const compiled = routes.map(([method, pattern, handler]) => ({ method, pattern: new URLPattern({ pathname: pattern }), handler }));

const RESULTS_PAGE = new URLPattern({ pathname: "/matrices/:id" });

export async function handleApi(req: Request, env: Env): Promise<Response> {
  const url = new URL(req.url);
  if (url.pathname === "/healthz") return json({ ok: true });
  const page = RESULTS_PAGE.exec(url);
  if (page && req.method === "GET") {
    const d = depsFrom(env);
    // A page cannot send a header on navigation: it takes a signed link for this one matrix (results-link.ts).
    const id = idParam(page.pathname.groups.id, MATRIX_ID, "id");
    await checkResultsLink(d.config.API_TOKEN, id, url.searchParams, Math.floor(Date.now() / 1000));
    const [record, runs] = await Promise.all([readMatrix(d.store, id), readRuns(d.store, id)]);
    if (!record) throw apiError("not_found", `no matrix with id ${id}`, "id");
    const progress = await readMatrixStatus(d, id, { record, runs });
    const summary = buildSummary(id, record.spec.name, record.cells, record.spec.runs, runs);
    const nonce = btoa(String.fromCharCode(...crypto.getRandomValues(new Uint8Array(16))));
    return new Response(resultsPage(id, progress, summary, nonce), { headers: resultsPageHeaders(nonce) });
  }
  const matches = compiled.filter((r) => r.pattern.test(url));
  if (!matches.length) throw apiError("not_found", `no route ${url.pathname}`);
  const route = matches.find((r) => r.method === req.method);
  if (!route) throw apiError("method_not_allowed", `${req.method} is not allowed on ${url.pathname}; use ${matches.map((r) => r.method).join(", ")}`);
  const d = depsFrom(env);
  checkBearer(req, d.config.API_TOKEN);
  try {
    return await route.handler(req, env, d, (route.pattern.exec(url)?.pathname.groups ?? {}) as Record<string, string>);
  } catch (e) {
    // An agent's 4xx is the caller's problem (a bad path, a missing directory): pass it on with its field.
    if (e instanceof AgentCallError && e.permanent) throw asSnapflowError(e);
    throw e;
  }
}
