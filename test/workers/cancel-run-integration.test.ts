// POST /api/runs/:id/cancel (src/runs/cancel-run.ts) through the real stack: the Workflows in workerd, the real host
// agent and S3 server. A backup cancelled mid-transfer leaves nothing (no object, open upload, upload record, staging
// file or lease; no snapshot listed) and its source as it was; a restore cancelled mid-transfer leaves its target
// exactly as it was. Both say `cancelled`; a second cancel is a 409, an unknown id a 404.
import { expect, it } from "vitest";
import { agent, api, freshSandbox, leftovers, testStore } from "./helpers.ts";

const manifest = (sandbox: string, path: string) => agent(sandbox, "POST", "/v1/manifest", { path });
const leaseKeys = async (sandbox: string) => (await (await testStore()).list(`targets/${sandbox}/`)).objects.map((o) => o.key);

async function waitForStep(kind: "backup" | "restore", id: string, step: string): Promise<void> {
  for (const deadline = Date.now() + 60_000; ; await new Promise((r) => setTimeout(r, 50))) {
    const s = (await api("GET", `/api/${kind}s/${id}`)).json;
    if (s.steps?.[step]) return;
    if (["complete", "errored", "terminated"].includes(s.status) || Date.now() > deadline) throw new Error(`${kind} ${id} never reached ${step}: ${JSON.stringify(s)}`);
  }
}

it("a backup cancelled mid-transfer leaves nothing behind and says cancelled; a second cancel is refused", async () => {
  const src = freshSandbox("cancel-src");
  await agent(src, "POST", "/v1/datasets", { path: "/workspace/app", kind: "node-modules", seed: 61, files: 2000, bytes: 150_000_000 });
  const before = await manifest(src, "/workspace/app");
  const b = await api("POST", "/api/backups", { sandboxId: src, path: "/workspace/app" });
  expect(b.status).toBe(202);
  const id = b.json.id as string;
  // tar-zst-pipe: archive is done in the transfer's one pass, so once it is listed the transfer is under way.
  await waitForStep("backup", id, "archive");

  const cancelled = await api("POST", `/api/runs/${id}/cancel`);
  expect(cancelled.status, JSON.stringify(cancelled.json)).toBe(200);
  expect(cancelled.json).toMatchObject({ id, kind: "backup", status: "cancelled", stoppedAt: "transfer" });
  const status = (await api("GET", `/api/backups/${id}`)).json;
  expect(status.status).toBe("cancelled");
  expect(status.error).toMatch(new RegExp(`backup ${id} cancelled at transfer`));

  // A step the engine let go of gets a moment to notice; then nothing of the backup may exist anywhere.
  await new Promise((r) => setTimeout(r, 1500));
  expect(await leftovers(src, "/workspace/app", id)).toEqual([]);
  expect((await (await testStore()).list(`snapshots/${id}/`)).objects).toEqual([]);
  expect((await api("GET", "/api/snapshots")).json.snapshots.map((s: { id: string }) => s.id)).not.toContain(id);
  expect(await leaseKeys(src)).toEqual([]);
  expect(await manifest(src, "/workspace/app")).toEqual(before);

  const again = await api("POST", `/api/runs/${id}/cancel`);
  expect(again.status).toBe(409);
  expect(again.json.error).toMatchObject({ code: "run_ended", field: "id" });
  expect(again.json.error.message).toMatch(/was already cancelled/);
  // The path is free again: a new backup of it starts (and completes).
  const next = await api("POST", "/api/backups", { sandboxId: src, path: "/workspace/app" });
  expect(next.status).toBe(202);
  for (let s = next.json; !["complete", "errored"].includes(s.status); await new Promise((r) => setTimeout(r, 200))) s = (await api("GET", `/api/backups/${next.json.id}`)).json;
});

it("a restore cancelled mid-transfer puts its target back as it was", async () => {
  const src = freshSandbox("cancel-rsrc");
  const dst = freshSandbox("cancel-rdst");
  await agent(src, "POST", "/v1/datasets", { path: "/workspace/app", kind: "node-modules", seed: 62, files: 2000, bytes: 150_000_000 });
  await agent(dst, "POST", "/v1/datasets", { path: "/workspace/app", kind: "tricky", seed: 63 });
  const before = await manifest(dst, "/workspace/app");
  const b = await api("POST", "/api/backups", { sandboxId: src, path: "/workspace/app" });
  for (let s = b.json; !["complete", "errored"].includes(s.status); await new Promise((r) => setTimeout(r, 200))) s = (await api("GET", `/api/backups/${b.json.id}`)).json;

  const r = await api("POST", "/api/restores", { snapshotId: b.json.id, sandboxId: dst, path: "/workspace/app", replace: true });
  expect(r.status).toBe(202);
  await waitForStep("restore", r.json.id, "probe");
  const cancelled = await api("POST", `/api/runs/${r.json.id}/cancel`);
  expect(cancelled.status, JSON.stringify(cancelled.json)).toBe(200);
  expect(cancelled.json).toMatchObject({ kind: "restore", status: "cancelled" });
  expect((await api("GET", `/api/restores/${r.json.id}`)).json.status).toBe("cancelled");
  await new Promise((r) => setTimeout(r, 1500));
  expect(await manifest(dst, "/workspace/app")).toEqual(before);
  expect(await leftovers(dst, "/workspace/app")).toEqual([]);
  expect(await leaseKeys(dst)).toEqual([]);
  // Its read lease on the snapshot went too: the snapshot can be deleted.
  expect((await api("DELETE", `/api/snapshots/${b.json.id}`)).status).toBe(200);
});

it("cancel answers 404 for an id no run has and 400 for what is not a run id", async () => {
  const unknown = await api("POST", "/api/runs/bk-20200101000000-00000000/cancel");
  expect(unknown.status).toBe(404);
  expect(unknown.json.error).toMatchObject({ code: "not_found", field: "id" });
  const bad = await api("POST", "/api/runs/not-a-run/cancel");
  expect(bad.status).toBe(400);
  expect(bad.json.error).toMatchObject({ code: "bad_request", field: "id" });
  const body = await api("POST", "/api/runs/bk-20200101000000-00000000/cancel", { force: true });
  expect(body.status).toBe(400);
  expect(body.json.error.message).toMatch(/force/);
});
