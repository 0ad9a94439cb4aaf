// The watchdog's "cannot continue" paths (src/runs/interrupted-runs.ts), through the real stack: the Workflows in
// workerd, the real host agent and S3 server. A run whose Workflow was terminated mid-run (no cleanup of its own
// ran, its lease is left) and a run interrupted more often than the bound are failed by the watchdog: its cleanup
// done (a restore's target exactly as it was; a backup's objects, uploads and staging gone), its lease released, its
// status `errored`/`terminated` with a reason naming what happened. The resume path, which needs a real restart
// of wrangler dev, is test/node/stack-restart-integration.test.ts.
import { env } from "cloudflare:workers";
import { expect, it } from "vitest";
import { depsFrom } from "../../src/deps.ts";
import { KV_KEYS } from "../../src/kv-keys.ts";
import { MAX_INTERRUPTIONS, watchRuns } from "../../src/runs/interrupted-runs.ts";
import { agent, api, faultRow, freshSandbox, leftovers, testStore } from "./helpers.ts";

const manifest = (sandbox: string, path: string) => agent(sandbox, "POST", "/v1/manifest", { path });

async function waitForStep(kind: "backup" | "restore", id: string, step: string): Promise<void> {
  for (const deadline = Date.now() + 60_000; ; await new Promise((r) => setTimeout(r, 50))) {
    const s = (await api("GET", `/api/${kind}s/${id}`)).json;
    if (s.steps?.[step]) return;
    if (["complete", "errored", "terminated"].includes(s.status) || Date.now() > deadline) throw new Error(`${kind} ${id} never reached ${step}: ${JSON.stringify(s)}`);
  }
}

const leaseKeys = async () => (await (await testStore()).list("targets/")).objects.map((o) => o.key);

it("a restore whose Workflow was terminated after its probe is failed by the watchdog: target as it was, lease gone", async () => {
  const src = freshSandbox("src");
  const dst = freshSandbox("dst");
  await agent(src, "POST", "/v1/datasets", { path: "/workspace/app", kind: "node-modules", seed: 41, files: 400, bytes: 20_000_000 });
  await agent(dst, "POST", "/v1/datasets", { path: "/workspace/app", kind: "tricky", seed: 42 });
  const before = await manifest(dst, "/workspace/app");
  const b = await api("POST", "/api/backups", { sandboxId: src, path: "/workspace/app", strategy: "tar-zst-pipe" });
  for (let s = b.json; !["complete", "errored"].includes(s.status); await new Promise((r) => setTimeout(r, 200))) s = (await api("GET", `/api/backups/${b.json.id}`)).json;

  const r = await api("POST", "/api/restores", { snapshotId: b.json.id, sandboxId: dst, path: "/workspace/app", replace: true, strategy: "presigned-tar-zst-pipe" });
  expect(r.status).toBe(202);
  await waitForStep("restore", r.json.id, "probe");
  const t = Date.now();
  // What `wrangler workflows instances terminate` does: the run stops where it is, its own cleanup never runs.
  const instance = await env.RESTORE_WORKFLOW.get(r.json.id);
  await instance.terminate();
  for (let i = 0; (await instance.status()).status !== "terminated" && i < 100; i++) await new Promise((r) => setTimeout(r, 50));
  const report = await watchRuns(env, depsFrom(env), { sandboxId: dst });
  expect(report.failed.map((f) => f.runId), JSON.stringify(report)).toContain(r.json.id);

  const status = (await api("GET", `/api/restores/${r.json.id}`)).json;
  expect(status.status).toBe("terminated");
  expect(status.error).toMatch(/failed: its Workflow was terminated before its cleanup finished; its cleanup was done/);
  expect(status.interrupted.join("\n")).toMatch(/its Workflow is terminated.*failed/);
  expect(await manifest(dst, "/workspace/app")).toEqual(before);
  expect(await leaseKeys()).not.toContain(expect.stringContaining(`targets/${dst}/`));
  faultRow({ fault: "restore's Workflow terminated after its probe (no cleanup of its own)", phase: "restore transfer", outcome: "failed by the watchdog, naming it; cleanup done, target as it was", retries: 0, ms: Date.now() - t, leftovers: await leftovers(dst, "/workspace/app") });
});

it(`a backup interrupted more than ${MAX_INTERRUPTIONS} times is terminated and failed, not resumed again; nothing of it is left`, async () => {
  const src = freshSandbox("src");
  await agent(src, "POST", "/v1/datasets", { path: "/workspace/app", kind: "node-modules", seed: 43, files: 2000, bytes: 150_000_000 });
  const b = await api("POST", "/api/backups", { sandboxId: src, path: "/workspace/app", strategy: "tar-zst-pipe" });
  const id = b.json.id as string;
  await waitForStep("backup", id, "archive");
  // Three earlier interruptions, each resumed (what three stack restarts in this run's life leave).
  const note = (i: number) => ({ at: new Date(Date.now() - (3 - i) * 1000).toISOString(), cause: "the stack restarted at …", action: "resumed", detail: "at transfer" });
  await env.INDEX.put(KV_KEYS.interrupted(id), JSON.stringify([note(0), note(1), note(2)]));
  const t = Date.now();
  // A stall bound of 0: the run, live and mid-transfer, counts as interrupted again now.
  const report = await watchRuns(env, depsFrom(env), { stallMs: -1, sandboxId: src });
  const failed = report.failed.find((f) => f.runId === id);
  const released = report.released.find((f) => f.runId === id);
  expect(failed ?? released, JSON.stringify(report)).toBeDefined();
  const status = (await api("GET", `/api/backups/${id}`)).json;
  if (failed) {
    expect(failed.reason).toMatch(/interrupted 4 times.*not resumed again/);
    expect(status.status).toBe("terminated");
    expect(status.error).toMatch(/interrupted 4 times/);
    // Give a step the engine gave up on a moment to notice, then nothing of the backup may be in the store.
    await new Promise((r) => setTimeout(r, 1000));
    expect((await (await testStore()).list(`snapshots/${id}/`)).objects).toEqual([]);
    expect((await api("GET", "/api/snapshots")).json.snapshots.map((s: { id: string }) => s.id)).not.toContain(id);
  } else {
    // The record was written before the watchdog's terminate landed: success is final.
    expect(status.status).toBe("complete");
  }
  expect(await leaseKeys()).not.toContain(expect.stringContaining(`targets/${src}/`));
  faultRow({ fault: `backup interrupted ${MAX_INTERRUPTIONS + 1} times`, phase: "backup transfer", outcome: failed ? "terminated and failed by the watchdog, naming it; cleanup done" : "recorded first: complete", retries: MAX_INTERRUPTIONS, ms: Date.now() - t, leftovers: await leftovers(src, "/workspace/app", id) });
});
