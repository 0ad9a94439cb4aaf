// KV's one-write-per-second-per-key limit, enforced. Cloudflare KV answers a second write to the same key within
// about a second with 429; miniflare's local KV does not, so this project ("workers-kv-limit", vitest.config.ts)
// switches on a stand-in (src/testing/kv-write-limit.ts) for that control-plane limit, which cannot exist locally.
// With it, a backup and a restore (progress written after every step, several times a second), a snapshot's
// index entry and a matrix (its progress cache rewritten per result) must still complete, be recorded and be
// listed: nothing may depend on a KV write that was refused.
import { env } from "cloudflare:workers";
import { createExecutionContext, createScheduledController } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { depsFrom } from "../../src/deps.ts";
import { KV_KEYS } from "../../src/kv-keys.ts";
import { LIFECYCLE_CRON } from "../../src/snapshots/lifecycle-cron.ts";
import { recordSnapshot, readSnapshot } from "../../src/snapshots/records.ts";
import { refusedKvWrites } from "../../src/testing/kv-write-limit.ts";
import worker from "../../worker.ts";
import { agent, api, faultRow, freshSandbox, leftovers, runWorkflow } from "../workers/helpers.ts";

const tricky = { name: "tricky", kind: "tricky", seed: 3 };
const manifest = async (sandbox: string) => (await agent(sandbox, "POST", "/v1/manifest", { path: "/workspace/app" })).entries.map((e: any) => `${e.path} ${e.type} ${e.size ?? ""}`).sort();
const listed = async (id: string) => ((await api("GET", "/api/snapshots?limit=1000")).json.snapshots as { id: string }[]).some((s) => s.id === id);

describe("KV refusing a second write to a key within a second", () => {
  it("the stand-in refuses as production does, and a refused write does not count", async () => {
    const kv = depsFrom(env).kv;
    await kv.put("limit-probe", "1");
    await expect(kv.put("limit-probe", "2")).rejects.toThrow("KV PUT failed: 429 Too Many Requests");
    await expect(kv.delete("limit-probe")).rejects.toThrow("KV DELETE failed: 429 Too Many Requests");
    await kv.put("other-key", "x"); // another key is not limited
    await new Promise((r) => setTimeout(r, 1100));
    await kv.put("limit-probe", "3");
    expect(await kv.get("limit-probe")).toBe("3");
  });

  let snapshotId = "";
  let source = "";

  it("a backup and a restore whose progress is written several times a second complete, recorded and listed", async () => {
    source = freshSandbox("kvlim-src");
    await agent(source, "POST", "/v1/datasets", { path: "/workspace/app", ...tricky });
    let refusedBefore = refusedKvWrites();
    let t = Date.now();
    const backup = await runWorkflow("backup", { sandboxId: source, path: "/workspace/app" });
    const backupMs = Date.now() - t;
    const backupRefused = refusedKvWrites() - refusedBefore;
    snapshotId = backup.snapshotId;
    expect(backup.status).toBe("complete");
    // The final progress landed (tried again after the window): the status shows the last step.
    expect(Object.keys(backup.steps)).toContain("record");
    expect(await readSnapshot(depsFrom(env).store, depsFrom(env).kv, snapshotId)).toMatchObject({ id: snapshotId, status: "good" });
    expect(await listed(snapshotId)).toBe(true);
    // The limit was hit: progress is written after each step, faster than once a second.
    expect(backupRefused).toBeGreaterThan(0);
    faultRow({ fault: "KV refuses a 2nd write to a key within 1 s (429)", phase: "backup (progress after every step)", outcome: `complete, recorded, listed; ${backupRefused} progress writes refused`, retries: 0, ms: backupMs, leftovers: await leftovers(source, "/workspace/app", snapshotId) });

    const target = freshSandbox("kvlim-dst");
    refusedBefore = refusedKvWrites();
    t = Date.now();
    const restore = await runWorkflow("restore", { snapshotId, sandboxId: target, path: "/workspace/app" });
    const restoreMs = Date.now() - t;
    const restoreRefused = refusedKvWrites() - refusedBefore;
    expect(restore.status).toBe("complete");
    expect(Object.keys(restore.steps).length).toBeGreaterThan(1);
    expect(await manifest(target)).toEqual(await manifest(source));
    expect(restoreRefused).toBeGreaterThan(0);
    faultRow({ fault: "KV refuses a 2nd write to a key within 1 s (429)", phase: "restore (progress after every step)", outcome: `complete, tree equal to the source; ${restoreRefused} progress writes refused`, retries: 0, ms: restoreMs, leftovers: await leftovers(target, "/workspace/app") });
  });

  it("a refused index write is written once the window has passed; one lost for good is re-indexed from the store", async () => {
    expect(snapshotId).not.toBe("");
    const d = depsFrom(env);
    const record = (await readSnapshot(d.store, d.kv, snapshotId))!;
    // A retried record step: the entry was just written (here: removed), so the step's index write is refused.
    await d.kv.delete(KV_KEYS.snapshot(snapshotId));
    const refusedBefore = refusedKvWrites();
    const t = Date.now();
    await recordSnapshot(d.store, d.kv, record);
    const ms = Date.now() - t;
    expect(refusedKvWrites() - refusedBefore).toBe(1);
    expect(ms).toBeGreaterThanOrEqual(1000);
    expect(await listed(snapshotId)).toBe(true);
    faultRow({ fault: "KV refuses a snapshot's index write (2nd write within 1 s)", phase: "backup record", outcome: "written after the window; listed", retries: 1, ms, leftovers: [] });

    // Every try refused (the entry never written): the cron's reconcile indexes the record from the store.
    await env.INDEX.delete(KV_KEYS.snapshot(snapshotId));
    expect(await listed(snapshotId)).toBe(false);
    const c = Date.now();
    await worker.scheduled(createScheduledController({ scheduledTime: new Date(), cron: LIFECYCLE_CRON }), env, createExecutionContext());
    expect((await api("GET", "/api/retention")).json.reconciled.reindexed).toContain(snapshotId);
    expect(await listed(snapshotId)).toBe(true);
    faultRow({ fault: "KV refuses every try of a snapshot's index write", phase: "backup record → lifecycle cron", outcome: "re-indexed from the store's record; listed", retries: "cron", ms: Date.now() - c, leftovers: [] });
  });

  it("a matrix whose progress cache is refused completes with the store's status, and listing shows it complete", async () => {
    const refusedBefore = refusedKvWrites();
    const t = Date.now();
    const started = await api("POST", "/api/matrices", { name: "kv-limited", datasets: [tricky], backups: ["tar-zst-pipe"], restores: ["presigned-tar-zst-pipe"], runs: 3, dropCaches: false, concurrency: 3 });
    expect(started.status, JSON.stringify(started.json)).toBe(202);
    const id: string = started.json.id;
    let m: any;
    for (const deadline = Date.now() + 100_000; ; ) {
      m = (await api("GET", `/api/matrices/${id}`)).json;
      if (m.progress.status === "complete") break;
      if (Date.now() > deadline) throw new Error(`matrix ${id} not complete: ${JSON.stringify(m.progress)}`);
      await new Promise((r) => setTimeout(r, 250));
    }
    expect(m.progress).toMatchObject({ total: 3, done: 3, failed: 0, sent: 3, deadLettered: [] });
    expect(m.summary.rows[0].n).toBe(3);
    // Listing reads KV's cache: the final write is tried again after the window, so it says complete.
    let inList: any;
    for (const deadline = Date.now() + 15_000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 500))) {
      inList = (await api("GET", "/api/matrices")).json.matrices.find((x: any) => x.id === id);
      if (inList?.status === "complete") break;
    }
    expect(inList).toMatchObject({ id, status: "complete" });
    const refused = refusedKvWrites() - refusedBefore;
    faultRow({ fault: "KV refuses a 2nd write to a key within 1 s (429)", phase: "matrix (3 runs at once; cache per result)", outcome: `complete, 3 of 3 runs, status from the store; listed complete; ${refused} KV writes refused`, retries: 0, ms: Date.now() - t, leftovers: [] });
  });
});
