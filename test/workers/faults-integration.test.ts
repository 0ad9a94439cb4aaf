// Nothing lost under faults, through the real stack: the Worker's Workflows in workerd, the real host agent (real
// tar, zstd, renames) and the real S3 server. Faults are real too: a stored archive damaged in the store, the
// agent refusing requests (its test-only fault switch: a 503 for the next N requests to a route), two requests
// racing. Nothing of ours is mocked. Each test asserts the outcome (completes, or fails naming the cause), that the
// target is as it was, and that nothing is left behind: no tree beside the target, no swap journal, no staging
// file, no mount, no open multipart upload.
import { env } from "cloudflare:workers";
import { introspectWorkflow } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { cleanupBackup } from "../../src/backup/backup-phases.ts";
import { depsFrom } from "../../src/deps.ts";
import { runLifecycle } from "../../src/snapshots/lifecycle-cron.ts";
import { targetLeaseKey } from "../../src/snapshots/target-leases.ts";
import { findBackup } from "../../src/strategies/registry.ts";
import { withUploadRecords } from "../../src/store/upload-records.ts";
import { UPLOAD_PREFIXES, UPLOAD_SWEEP_OLDER_THAN_MS, sweepUploads } from "../../src/store/sweep-uploads.ts";
import { packKey } from "../../src/chunks/pack-keys.ts";
import { DEFAULT_TENANT } from "../../src/snapshots/tenant.ts";
import { agent, api, faultRow, freshSandbox, leftovers, namesIn, openUploads, putFile, runWorkflow, sandboxLeftovers, storeRequests, testStore } from "./helpers.ts";

const manifest = (sandbox: string, path: string) => agent(sandbox, "POST", "/v1/manifest", { path });

/** A source tree backed up, and a target sandbox holding a different tree of its own at /workspace/app. */
async function snapshotAndOccupiedTarget(seed: number, strategy = "tar-zst-pipe") {
  const src = freshSandbox("src");
  const dst = freshSandbox("dst");
  await agent(src, "POST", "/v1/datasets", { path: "/workspace/app", kind: "tricky", seed });
  await agent(dst, "POST", "/v1/datasets", { path: "/workspace/app", kind: "node-modules", seed: seed + 1000, files: 60, bytes: 400_000 });
  const b = await runWorkflow("backup", { sandboxId: src, path: "/workspace/app", strategy });
  return { src, dst, snapshotId: b.snapshotId as string, before: await manifest(dst, "/workspace/app") };
}

/** Overwrites the middle of a stored archive with other bytes, keeping its length: damage the store did not see. */
/** Polls a run's status through the API until it ends; fails unless it completed. */
async function waitForRun(kind: "backups" | "restores", id: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const s = (await api("GET", `/api/${kind}/${id}`)).json;
    if (s.status === "complete") return;
    if (s.status === "errored" || Date.now() > deadline) throw new Error(`${kind} ${id}: ${s.status} ${s.error ?? ""}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

async function damageArchive(snapshotId: string): Promise<void> {
  const store = await testStore();
  const [o] = (await store.list(`snapshots/${snapshotId}/archive.`)).objects;
  const got = await store.get(o!.key);
  const bytes = new Uint8Array(await new Response(got!.body).arrayBuffer());
  for (let i = Math.floor(bytes.length / 3); i < Math.floor(bytes.length / 3) + 64 && i < bytes.length; i++) bytes[i] = bytes[i]! ^ 0xa5;
  await store.put(o!.key, bytes);
}

describe("replace is atomic: the old tree stays until the new one is verified and recorded", () => {
  // Piped, zstd meets the damage first and says so; staged, the SHA-256 of what arrived is compared with the record.
  for (const [restore, cause] of [["presigned-tar-zst-pipe", /zstd.*(corrupt|error)/i], ["restore-tar-zst", /arrived damaged.*expected .* sha256/]] as const) {
    it(`${restore}: a damaged stored archive fails the restore, and the tree that was there is byte for byte as it was`, async () => {
      const { dst, snapshotId, before } = await snapshotAndOccupiedTarget(31);
      await damageArchive(snapshotId);
      const t = Date.now();
      const r = await runWorkflow("restore", { snapshotId, sandboxId: dst, path: "/workspace/app", strategy: restore, replace: true }, "errored");
      const ms = Date.now() - t;
      // The cause is named, not a consequence of it (tar's "Unexpected EOF").
      expect(r.error).toMatch(cause);
      // Content hashes, modes, times, links: the whole tree as it was.
      expect((await manifest(dst, "/workspace/app")).entries).toEqual(before.entries);
      expect(await sandboxLeftovers(dst, "/workspace/app")).toEqual([]);
      expect((await (await testStore()).list(`restoring/${snapshotId}/`)).objects).toEqual([]);
      // Reads of the archive: the test's own read to damage it, then each restore attempt (tar-zst-pipe's verify
      // does not read the archive back: the Worker hashed it on the way, and the verify only HEADs it).
      const attempts = (await storeRequests(`snapshots/${snapshotId}/archive`)).filter((x) => x.startsWith("GET")).length - 1;
      expect(attempts).toBe(4);
      faultRow({ fault: "stored archive damaged (replace: true over a tree)", phase: `restore transfer (${restore})`, outcome: `failed, naming it; old tree intact`, retries: attempts - 1, ms, leftovers: await leftovers(dst, "/workspace/app") });
    });
  }

  it("a good restore with replace swaps the new tree in and removes the old one, leaving nothing beside it", async () => {
    const { src, dst, snapshotId } = await snapshotAndOccupiedTarget(32);
    const r = await runWorkflow("restore", { snapshotId, sandboxId: dst, path: "/workspace/app", replace: true });
    expect(r.steps.verify).toMatchObject({ replaced: true });
    expect(r.steps.record).toMatchObject({ removedOld: true });
    expect((await manifest(dst, "/workspace/app")).entries).toEqual((await manifest(src, "/workspace/app")).entries);
    expect(await sandboxLeftovers(dst, "/workspace/app")).toEqual([]);
  });

  it("a restore into a root (/workspace itself) swaps through /snapflow/swaps and leaves nothing there", async () => {
    const src = freshSandbox("src");
    const dst = freshSandbox("dst");
    await agent(src, "POST", "/v1/datasets", { path: "/workspace/app", kind: "tricky", seed: 33 });
    await agent(dst, "POST", "/v1/datasets", { path: "/workspace/old", kind: "tricky", seed: 34 });
    const b = await runWorkflow("backup", { sandboxId: src, path: "/workspace/app" });
    const r = await runWorkflow("restore", { snapshotId: b.snapshotId, sandboxId: dst, path: "/workspace", replace: true });
    expect(r.status).toBe("complete");
    expect((await manifest(dst, "/workspace")).entries).toEqual((await manifest(src, "/workspace/app")).entries);
    expect(await sandboxLeftovers(dst, "/workspace/x")).toEqual([]);
  });
});

describe("mount restores keep what was there until the new mount is ready", () => {
  it("a mounted image is replaced only by a verified one; a damaged one leaves the old mount serving", async () => {
    const src = freshSandbox("src");
    const dst = freshSandbox("dst");
    await agent(src, "POST", "/v1/datasets", { path: "/workspace/app", kind: "tricky", seed: 41 });
    await agent(dst, "POST", "/v1/datasets", { path: "/workspace/app", kind: "tricky", seed: 42 });
    const first = await runWorkflow("backup", { sandboxId: src, path: "/workspace/app", strategy: "squashfs-zstd-3" });
    const firstTree = await manifest(src, "/workspace/app");
    await agent(src, "POST", "/v1/datasets", { path: "/workspace/app", kind: "tricky", seed: 43, replace: true });
    const second = await runWorkflow("backup", { sandboxId: src, path: "/workspace/app", strategy: "squashfs-zstd-3" });
    const secondTree = await manifest(src, "/workspace/app");
    const restore = (snapshotId: string, expected: "complete" | "errored" = "complete") =>
      runWorkflow("restore", { snapshotId, sandboxId: dst, path: "/workspace/app", strategy: "presigned-squashfs-mount", replace: true }, expected);

    // A plain tree replaced by a mount: mounted beside the target, checked, then made again at the target.
    await restore(first.snapshotId);
    expect((await manifest(dst, "/workspace/app")).entries).toEqual(firstTree.entries);
    expect((await agent(dst, "GET", "/v1/mounts")).mounts.map((m: any) => m.path)).toEqual(["/workspace/app"]);

    // A damaged image over that mount: the failure leaves the first mount serving, untouched.
    await damageArchive(second.snapshotId);
    const t = Date.now();
    const failed = await restore(second.snapshotId, "errored");
    const ms = Date.now() - t;
    expect(failed.error).toMatch(/arrived damaged/);
    expect((await manifest(dst, "/workspace/app")).entries).toEqual(firstTree.entries);
    expect((await agent(dst, "GET", "/v1/mounts")).mounts.map((m: any) => m.path)).toEqual(["/workspace/app"]);
    expect((await namesIn(dst, "/workspace")).filter((n) => n.startsWith(".snapflow-"))).toEqual([]);
    expect(await namesIn(dst, "/snapflow/swaps")).toEqual([]);
    // Reads of the image: the backup's verify, the test's read to damage it, then each restore attempt.
    const gets = (await storeRequests(`snapshots/${second.snapshotId}/archive`)).filter((x) => x.startsWith("GET")).length - 2;
    faultRow({ fault: "stored image damaged (replace over a mounted image)", phase: "restore transfer (presigned-squashfs-mount)", outcome: "failed, naming it; old mount serving", retries: gets - 1, ms, leftovers: (await sandboxLeftovers(dst, "/workspace/app")).filter((x) => x !== "mount /workspace/app" && !x.startsWith("/snapflow/images/")) });

    // A good image over the mount: the old mount comes down only once the new image is verified beside it.
    const again = await restore(first.snapshotId);
    const mounts = (await agent(dst, "GET", "/v1/mounts")).mounts;
    expect(mounts.map((m: any) => m.path)).toEqual(["/workspace/app"]);
    expect(mounts[0].source).toContain(again.id);
    expect((await manifest(dst, "/workspace/app")).entries).toEqual(firstTree.entries);
    await agent(dst, "DELETE", "/v1/sandbox");
  });
});

describe("success is final: nothing after the record can undo a run", () => {
  it("a restore whose commit keeps failing after its record was written still ends complete, with the new tree in place", async () => {
    const { src, dst, snapshotId } = await snapshotAndOccupiedTarget(35);
    // The record step writes the record, then asks the agent to remove the old tree: that fails on every one of
    // the step's 6 attempts. The cleanup that follows finds the record and finishes the commit instead of rolling
    // back a recorded restore.
    await agent(dst, "POST", "/v1/faults", { route: "POST /v1/swap/commit", times: 6 });
    const t = Date.now();
    const r = await runWorkflow("restore", { snapshotId, sandboxId: dst, path: "/workspace/app", replace: true });
    expect(r.status).toBe("complete");
    expect((await manifest(dst, "/workspace/app")).entries).toEqual((await manifest(src, "/workspace/app")).entries);
    expect(await sandboxLeftovers(dst, "/workspace/app")).toEqual([]);
    faultRow({ fault: "agent refuses the commit 6 times after the record was written", phase: "restore record → cleanup", outcome: "complete (the cleanup finishes the commit)", retries: "5 (record step), then cleanup", ms: Date.now() - t, leftovers: await leftovers(dst, "/workspace/app") });
  });
});

describe("one writer per target", () => {
  it("two restores racing for one target: one runs, the other is refused with a 409 naming it; the path is free afterwards", async () => {
    const { src, dst, snapshotId } = await snapshotAndOccupiedTarget(36);
    await using wf = await introspectWorkflow(env.RESTORE_WORKFLOW);
    await wf.modifyAll(async (m) => m.disableRetryDelays());
    const body = { snapshotId, sandboxId: dst, path: "/workspace/app", replace: true };
    const both = await Promise.all([api("POST", "/api/restores", body), api("POST", "/api/restores", body)]);
    expect(both.map((r) => r.status).sort()).toEqual([202, 409]);
    const winner = both.find((r) => r.status === 202)!.json.id;
    const loser = both.find((r) => r.status === 409)!.json.error;
    expect(loser).toMatchObject({ code: "target_busy", field: "path" });
    expect(loser.message).toContain(winner);
    // A backup of the same path is refused too while the restore runs.
    const backup = await api("POST", "/api/backups", { sandboxId: dst, path: "/workspace/app" });
    expect(backup.status).toBe(409);
    expect(backup.json.error.message).toContain(winner);

    const [instance] = await wf.get();
    await instance!.waitForStatus("complete");
    expect((await manifest(dst, "/workspace/app")).entries).toEqual((await manifest(src, "/workspace/app")).entries);
    expect(await sandboxLeftovers(dst, "/workspace/app")).toEqual([]);
    // Released at the end: the next run of the path is accepted.
    const next = await api("POST", "/api/backups", { sandboxId: dst, path: "/workspace/app" });
    expect(next.status).toBe(202);
    faultRow({ fault: "two restores (and a backup) racing for one target", phase: "API, before any Workflow", outcome: "one runs and completes; the others 409 target_busy naming it", retries: 0, ms: 0, leftovers: await leftovers(dst, "/workspace/app") });
  });

  it("nested paths are one target: backups of /workspace (enclosing) and /workspace/app/node_modules (enclosed) are refused while a restore swaps /workspace/app; a sibling path is not", async () => {
    const { dst, snapshotId } = await snapshotAndOccupiedTarget(38);
    await agent(dst, "POST", "/v1/datasets", { path: "/workspace/sibling", kind: "tricky", seed: 39 });
    await using wf = await introspectWorkflow(env.RESTORE_WORKFLOW);
    await wf.modifyAll(async (m) => m.disableRetryDelays());
    const restore = await api("POST", "/api/restores", { snapshotId, sandboxId: dst, path: "/workspace/app", replace: true });
    expect(restore.status).toBe(202);
    const outer = await api("POST", "/api/backups", { sandboxId: dst, path: "/workspace" });
    expect(outer.status).toBe(409);
    expect(outer.json.error).toMatchObject({ code: "target_busy", field: "path" });
    expect(outer.json.error.message).toContain(restore.json.id);
    expect(outer.json.error.message).toContain("/workspace/app");
    const inner = await api("POST", "/api/backups", { sandboxId: dst, path: "/workspace/app/node_modules" });
    expect(inner.status).toBe(409);
    // The refused run left no lease of its own behind: only the restore's key is there.
    expect((await (await testStore()).list(`targets/${dst}/`)).objects.map((o) => o.key)).toEqual([await targetLeaseKey(dst, "/workspace/app")]);
    const sibling = await api("POST", "/api/backups", { sandboxId: dst, path: "/workspace/sibling" });
    expect(sibling.status).toBe(202);

    const [instance] = await wf.get();
    await instance!.waitForStatus("complete");
    await waitForRun("backups", sibling.json.id);
    // Both ended: the enclosing path is free again.
    const after = await api("POST", "/api/backups", { sandboxId: dst, path: "/workspace" });
    expect(after.status).toBe(202);
    await waitForRun("backups", after.json.id);
  });

  it("a lease whose run is gone (killed before it could release) is taken over", async () => {
    const dst = freshSandbox("dst");
    await agent(dst, "POST", "/v1/datasets", { path: "/workspace/app", kind: "tricky", seed: 37 });
    const stale = { sandboxId: dst, path: "/workspace/app", runId: "rs-20200101000000-deadbeef", kind: "restore", takenAt: new Date(Date.now() - 3600_000).toISOString(), expiresAt: new Date(Date.now() + 3600_000).toISOString() };
    await (await testStore()).put(await targetLeaseKey(dst, "/workspace/app"), JSON.stringify(stale));
    const b = await runWorkflow("backup", { sandboxId: dst, path: "/workspace/app" });
    expect(b.status).toBe("complete");
  });
});

describe("no orphans in the sandbox: the agent's sweeper", () => {
  it("a restore that died after swapping in (no commit, no cleanup) is rolled back by the sweep: the old tree returns", async () => {
    const { dst, before } = await snapshotAndOccupiedTarget(44);
    // Run the restore's steps by hand up to the swap, then stop, as a killed Worker would: the new tree is at the
    // target, the old one beside it, the journal says "swapped", and nothing will ever commit or roll back.
    const id = "rs-20260101000000-0000dead";
    const swap = { target: "/workspace/app", id };
    const planned = await agent(dst, "POST", "/v1/swap/plan", swap);
    await agent(dst, "POST", "/v1/datasets", { path: planned.staged, kind: "tricky", seed: 45 });
    await agent(dst, "POST", "/v1/swap/in", swap);
    expect((await manifest(dst, "/workspace/app")).entries).not.toEqual(before.entries);
    // Younger than the bound: kept (a run might still own it).
    expect((await agent(dst, "POST", "/v1/sweep", {})).swaps).toEqual([]);
    const swept = await agent(dst, "POST", "/v1/sweep", { olderThanSeconds: 0 });
    expect(swept.swaps).toEqual([id]);
    expect((await manifest(dst, "/workspace/app")).entries).toEqual(before.entries);
    expect(await sandboxLeftovers(dst, "/workspace/app")).toEqual([]);
  });

  it("staging files a dead backup left are removed by the sweep, and only once older than the bound", async () => {
    const src = freshSandbox("src");
    await putFile(src, "/snapflow/staging/bk-20260101000000-0000dead.tar.zst", "half an archive");
    expect((await agent(src, "POST", "/v1/sweep", {})).removed).toEqual([]);
    expect((await agent(src, "POST", "/v1/sweep", { olderThanSeconds: 0 })).removed).toEqual(["/snapflow/staging/bk-20260101000000-0000dead.tar.zst"]);
    expect(await sandboxLeftovers(src, "/workspace/app")).toEqual([]);
  });
});

describe("no orphans in the store", () => {
  it("a multipart upload left open by a killed attempt is aborted by the backup's cleanup", async () => {
    const d = depsFrom(env);
    const snapshotId = `bk-20260101000000-${Math.random().toString(16).slice(2, 10)}`;
    const tracked = withUploadRecords(d, snapshotId);
    const key = `snapshots/${snapshotId}/archive.tar.zst`;
    // One upload from the Worker, one opened for presigned parts; a part sent to the first. Then the isolate "dies":
    // no catch block runs, nothing is aborted.
    const fromWorker = await tracked.store.createMultipartUpload(key);
    await fromWorker.uploadPart(1, new Uint8Array(5 * 2 ** 20));
    await tracked.presigner.createMultipartUpload(key);
    expect(await openUploads(`snapshots/${snapshotId}/`)).toHaveLength(2);

    const p = { snapshotId, sandboxId: freshSandbox("gone"), path: "/workspace/app", strategy: "tar-zst-pipe" };
    await cleanupBackup(d, p as never, findBackup("tar-zst-pipe")!);
    expect(await openUploads(`snapshots/${snapshotId}/`)).toEqual([]);
    expect((await d.store.list(`uploads/${snapshotId}/`)).objects).toEqual([]);
  });

  it("the lifecycle sweep aborts a recorded upload whose backup has ended (a run killed before its cleanup)", async () => {
    const src = freshSandbox("src");
    await agent(src, "POST", "/v1/datasets", { path: "/workspace/app", kind: "tricky", seed: 39 });
    // The introspector stays open so the finished instance can still be asked for its status (the test pool drops
    // instances when it closes; Cloudflare keeps them for days).
    await using wf = await introspectWorkflow(env.BACKUP_WORKFLOW);
    await wf.modifyAll(async (m) => m.disableRetryDelays());
    const b = (await api("POST", "/api/backups", { sandboxId: src, path: "/workspace/app" })).json;
    await (await wf.get())[0]!.waitForStatus("complete");
    // An upload the (now ended) backup opened and never settled: the isolate died between create and abort.
    const d = depsFrom(env);
    const left = await withUploadRecords(d, b.snapshotId).presigner.createMultipartUpload(`snapshots/${b.snapshotId}/archive.tar.zst.part`);
    expect(await openUploads(`snapshots/${b.snapshotId}/`)).toEqual([{ key: left.key, uploadId: left.uploadId }]);
    const report = await runLifecycle(env, new Date());
    expect(report.uploads.aborted).toContainEqual({ key: left.key, uploadId: left.uploadId, why: `backup ${b.snapshotId} has ended` });
    expect(await openUploads(`snapshots/${b.snapshotId}/`)).toEqual([]);
    expect((await d.store.list(`uploads/${b.snapshotId}/`)).objects).toEqual([]);
    // The good snapshot kept its objects.
    expect((await api("GET", `/api/snapshots/${b.snapshotId}`)).status).toBe(200);
  });

  it("the sweep finds an upload nobody recorded under packs/ too (a file-level backup's pack), and aborts it past the bound", async () => {
    const d = depsFrom(env);
    const snapshotId = `bk-20260101000000-${Math.random().toString(16).slice(2, 10)}`;
    const key = packKey(DEFAULT_TENANT, snapshotId);
    // Every place snapflow opens an upload is looked under (a prefix left out leaves its orphans open for good).
    expect(UPLOAD_PREFIXES.some((prefix) => key.startsWith(prefix))).toBe(true);
    const left = await d.presigner.createMultipartUpload(key); // not through withUploadRecords: no record
    const owner = async () => "live" as const; // recorded uploads (other tests' runs) are kept whatever their age
    // Younger than the bound: kept. (Only this key's prefix is listed, so nothing of another test is touched.)
    const only = [key];
    expect((await sweepUploads(d, owner, UPLOAD_SWEEP_OLDER_THAN_MS, Date.now(), only)).aborted).toEqual([]);
    const late = Date.now() + UPLOAD_SWEEP_OLDER_THAN_MS + 60_000;
    expect((await sweepUploads(d, owner, UPLOAD_SWEEP_OLDER_THAN_MS, late, only)).aborted).toEqual([{ key, uploadId: left.uploadId, why: "unrecorded, older than 12 h" }]);
    expect(await openUploads(key)).toEqual([]);
  });

  it("a backup whose transfer keeps failing leaves no snapshot object, upload record or open upload", async () => {
    const src = freshSandbox("src");
    await agent(src, "POST", "/v1/datasets", { path: "/workspace/app", kind: "tricky", seed: 38 });
    await agent(src, "POST", "/v1/faults", { route: "POST /v1/upload-multipart", times: 10 });
    const b = await runWorkflow("backup", { sandboxId: src, path: "/workspace/app", strategy: "tar-zst-presigned-multipart" }, "errored");
    expect(b.error).toMatch(/injected fault/);
    const store = await testStore();
    expect((await store.list(`snapshots/${b.snapshotId}/`)).objects).toEqual([]);
    expect((await store.list(`uploads/${b.snapshotId}/`)).objects).toEqual([]);
    expect(await openUploads(`snapshots/${b.snapshotId}/`)).toEqual([]);
    expect(await sandboxLeftovers(src, "/workspace/app")).toEqual([]);
  });
});
