// Delete and retention, end to end in workerd against the real agent and the real S3 server: a delete removes
// every object of a snapshot and its index entry; a base with deltas on it is refused (409 naming them) unless
// cascade; a snapshot being restored is refused (409 naming the restore) until the restore ends; policies are
// set and read through the API and applied, with expiries, by the lifecycle cron handler, which never removes a
// base that a kept snapshot builds on and says why it kept each snapshot.
import { env } from "cloudflare:workers";
import { createExecutionContext, createScheduledController, introspectWorkflow } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { s3Store } from "../../src/store/s3-store.ts";
import worker from "../../worker.ts";
import { LIFECYCLE_CRON } from "../../src/snapshots/lifecycle-cron.ts";
import { agent, api, freshSandbox, putFile, runWorkflow } from "./helpers.ts";

const store = s3Store({ endpoint: env.S3_ENDPOINT, bucket: env.S3_BUCKET, region: "auto", accessKeyId: env.S3_ACCESS_KEY_ID, secretAccessKey: env.S3_SECRET_ACCESS_KEY });
const objects = async (prefix: string) => (await store.list(prefix)).objects.map((o) => o.key);
const backup = async (body: Record<string, unknown>) => (await runWorkflow("backup", { strategy: "tar-zst-pipe", ...body })).snapshotId as string;

async function tree(label: string, seed = 1): Promise<string> {
  const sandbox = freshSandbox(label);
  await agent(sandbox, "POST", "/v1/datasets", { path: "/workspace/app", kind: "tricky", seed });
  return sandbox;
}

async function cron(when: Date): Promise<any> {
  await worker.scheduled(createScheduledController({ scheduledTime: when, cron: LIFECYCLE_CRON }), env, createExecutionContext());
  return (await api("GET", "/api/retention")).json;
}

describe("DELETE /api/snapshots/:id", () => {
  it("removes the archive, manifest, record and index entry; a second delete is a 404", async () => {
    const src = await tree("del");
    const id = await backup({ sandboxId: src, path: "/workspace/app" });
    expect(await objects(`snapshots/${id}/`)).toHaveLength(3);
    const r = await api("DELETE", `/api/snapshots/${id}`);
    expect(r).toMatchObject({ status: 200, json: { deleted: [id] } });
    expect(await objects(`snapshots/${id}/`)).toEqual([]);
    expect(await env.INDEX.get(`snapshot:${id}`)).toBeNull();
    expect((await api("GET", `/api/snapshots/${id}`)).status).toBe(404);
    expect((await api("GET", "/api/snapshots")).json.snapshots.map((s: any) => s.id)).not.toContain(id);
    expect((await api("DELETE", `/api/snapshots/${id}`)).json.error).toMatchObject({ code: "not_found", field: "id" });
    expect((await api("DELETE", "/api/snapshots/nope")).json.error).toMatchObject({ code: "bad_request", field: "id" });
  });

  it("a base with deltas on it is refused naming them; cascade deletes them first, deepest first", async () => {
    const src = await tree("chain");
    const base = await backup({ sandboxId: src, path: "/workspace/app" });
    await putFile(src, "/workspace/app/new-1.txt", "one");
    const d1 = await backup({ sandboxId: src, path: "/workspace/app", strategy: "tar-zst-delta", baseSnapshotId: base });
    await putFile(src, "/workspace/app/new-2.txt", "two");
    const d2 = await backup({ sandboxId: src, path: "/workspace/app", strategy: "tar-zst-delta", baseSnapshotId: d1 });
    expect(await objects(`snapshots/${d1}/`)).toContain(`snapshots/${d1}/deleted.json`);

    const refused = await api("DELETE", `/api/snapshots/${base}`);
    expect(refused.status).toBe(409);
    expect(refused.json.error.code).toBe("snapshot_in_use");
    expect(refused.json.error.message).toContain(d1);
    expect((await api("DELETE", `/api/snapshots/${d1}`)).json.error.message).toContain(d2);
    // Nothing was touched by the refusals.
    for (const id of [base, d1, d2]) expect((await api("GET", `/api/snapshots/${id}`)).status).toBe(200);

    const r = await api("DELETE", `/api/snapshots/${base}`, { cascade: true });
    expect(r).toMatchObject({ status: 200, json: { deleted: [d2, d1, base] } });
    for (const id of [base, d1, d2]) {
      expect(await objects(`snapshots/${id}/`)).toEqual([]);
      expect(await env.INDEX.get(`snapshot:${id}`)).toBeNull();
    }
  });

  it("a snapshot being restored is refused naming the restore, and deletable once the restore ended", async () => {
    const src = await tree("lease");
    const id = await backup({ sandboxId: src, path: "/workspace/app" });
    // The restore's transfer fails once: its retry waits 5 s (real delays), while the restore holds its lease.
    const dst = freshSandbox("lease-dst");
    await agent(dst, "POST", "/v1/faults", { route: "POST /v1/download", times: 1 });
    await using wf = await introspectWorkflow(env.RESTORE_WORKFLOW);
    const started = await api("POST", "/api/restores", { snapshotId: id, sandboxId: dst, path: "/workspace/app" });
    expect(started.status).toBe(202);
    const restoreId = started.json.id;
    for (let i = 0; i < 100 && !(await objects(`restoring/${id}/`)).length; i++) await new Promise((r) => setTimeout(r, 50));
    const refused = await api("DELETE", `/api/snapshots/${id}`);
    expect(refused.status).toBe(409);
    expect(refused.json.error.message).toContain(restoreId);
    const [instance] = await wf.get();
    await instance!.waitForStatus("complete");
    expect((await api("GET", `/api/restores/${restoreId}`)).json.steps.transfer).toBeDefined();
    expect(await objects(`restoring/${id}/`)).toEqual([]);
    expect((await api("DELETE", `/api/snapshots/${id}`)).status).toBe(200);
  });
});

describe("policies and the lifecycle cron", () => {
  it("PUT/GET/DELETE /api/policies, with bad input refused naming the field", async () => {
    const q = "sandboxId=pol-a&path=/workspace/app";
    expect((await api("GET", `/api/policies?${q}`)).status).toBe(404);
    const put = await api("PUT", `/api/policies?${q}`, { keepLast: 2, keepDaily: 7 });
    expect(put).toMatchObject({ status: 200, json: { sandboxId: "pol-a", path: "/workspace/app", keepLast: 2, keepDaily: 7 } });
    expect((await api("GET", `/api/policies?${q}`)).json).toMatchObject({ keepLast: 2, keepDaily: 7 });
    expect((await api("GET", "/api/policies?sandboxId=pol-a")).json.policies).toHaveLength(1);
    expect((await api("PUT", `/api/policies?${q}`, { keepLast: 0 })).json.error).toMatchObject({ code: "bad_request" });
    expect((await api("PUT", `/api/policies?${q}`, { keepHourly: 1 })).json.error).toMatchObject({ code: "bad_request" });
    expect((await api("PUT", "/api/policies?path=/workspace/app", { keepLast: 1 })).json.error).toMatchObject({ field: "sandboxId" });
    expect((await api("PUT", "/api/policies?sandboxId=pol-a&path=/etc", { keepLast: 1 })).json.error).toMatchObject({ field: "path" });
    expect((await api("DELETE", `/api/policies?${q}`)).json).toMatchObject({ deleted: true });
    expect((await api("GET", `/api/policies?${q}`)).status).toBe(404);
  });

  it("applies keepLast and expiries, keeps the bases of kept deltas, and reports why", async () => {
    const src = await tree("ret");
    const other = await tree("ret-other", 2);
    const full1 = await backup({ sandboxId: src, path: "/workspace/app" });
    await putFile(src, "/workspace/app/x.txt", "x");
    const delta = await backup({ sandboxId: src, path: "/workspace/app", strategy: "tar-zst-delta", baseSnapshotId: full1 });
    const full2 = await backup({ sandboxId: src, path: "/workspace/app" });
    const full3 = await backup({ sandboxId: src, path: "/workspace/app" });
    const short = await backup({ sandboxId: other, path: "/workspace/app", ttl: "1h" });
    const forever = await backup({ sandboxId: other, path: "/workspace/app" });
    // keepLast 2 keeps full3 and full2 … and the delta? It is the third newest: not kept, so its base goes too.
    expect((await api("PUT", `/api/policies?sandboxId=${src}&path=/workspace/app`, { keepLast: 2 })).status).toBe(200);

    const report = await cron(new Date(Date.now() + 2 * 3600_000));
    const removed = Object.fromEntries(report.removed.map((r: any) => [r.id, r.reason]));
    const kept = Object.fromEntries(report.kept.map((k: any) => [k.id, k.reasons]));
    expect(Object.keys(removed).sort()).toEqual([delta, full1, short].sort());
    expect(removed[short]).toMatch(/^expired at /);
    expect(removed[delta]).toMatch(/not kept by the policy/);
    // Dependants first.
    expect(report.removed.findIndex((r: any) => r.id === delta)).toBeLessThan(report.removed.findIndex((r: any) => r.id === full1));
    expect(kept[full3]).toEqual(["last 1 of 2"]);
    expect(kept[full2]).toEqual(["last 2 of 2"]);
    expect(kept[forever]).toEqual(["no policy"]);
    for (const id of [delta, full1, short]) expect(await objects(`snapshots/${id}/`)).toEqual([]);
    for (const id of [full2, full3, forever]) expect((await api("GET", `/api/snapshots/${id}`)).status).toBe(200);
  });

  it("never removes a base that a kept delta builds on", async () => {
    const src = await tree("ret-base");
    const base = await backup({ sandboxId: src, path: "/workspace/app", ttl: "1h" });
    await putFile(src, "/workspace/app/y.txt", "y");
    const delta = await backup({ sandboxId: src, path: "/workspace/app", strategy: "tar-zst-delta", baseSnapshotId: base });
    expect((await api("PUT", `/api/policies?sandboxId=${src}&path=/workspace/app`, { keepLast: 1 })).status).toBe(200);
    const report = await cron(new Date(Date.now() + 2 * 3600_000));
    const kept = Object.fromEntries(report.kept.map((k: any) => [k.id, k.reasons]));
    expect(kept[delta]).toEqual(["last 1 of 1"]);
    expect(kept[base]).toEqual([`base of ${delta}`]);
    expect(report.removed.map((r: any) => r.id)).not.toContain(base);
    expect((await api("GET", `/api/snapshots/${base}`)).status).toBe(200);
  });
});
