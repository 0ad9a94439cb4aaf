// Faults between the Worker and the agent, through the real Workflows: every request from the Worker to the agent
// passes a fault proxy of our own (test/fault-proxy.ts, the Worker's AGENT_URL), which cuts an answer or a request
// body after N bytes, stalls it, or refuses the connection, for one sandbox's requests to one route. The Worker's
// deadlines (src/sandbox/agent-deadlines.ts) are shortened for the test stack (vitest.config.ts): 8 s of silence on
// a streamed call, 15 s for a short call. Each test asserts: the run completes after the step's retry, verified (or
// fails naming the cause with the target as it was), and nothing is left: no open multipart upload or upload
// record, no staging file, swap journal, tree beside the target or mount. Retry delays are off (runWorkflow).
import { describe, expect, it } from "vitest";
import { agent, agentRequests, armAgentFault, faultRow, firedAgentFaults, freshSandbox, leftovers, openUploads, runWorkflow, sandboxLeftovers, storeRequests, testStore } from "./helpers.ts";

const manifest = (sandbox: string, path: string) => agent(sandbox, "POST", "/v1/manifest", { path });

/** An incompressible tree of about `mb` MB, so streams are really several MiB. */
async function tree(mb: number, seed: number): Promise<string> {
  const src = freshSandbox("src");
  await agent(src, "POST", "/v1/datasets", { path: "/workspace/app", kind: "added-data", seed, files: 30, bytes: 100_000, addedBytes: mb * 1e6 });
  return src;
}

async function nothingLeftInStore(snapshotId: string): Promise<void> {
  expect(await openUploads(`snapshots/${snapshotId}/`)).toEqual([]);
  expect((await (await testStore()).list(`uploads/${snapshotId}/`)).objects).toEqual([]);
}

async function timed<T>(p: Promise<T>): Promise<T & { testMs: number }> {
  const t = Date.now();
  const r = await p;
  return { ...r, testMs: Date.now() - t };
}

/** A backup of `src` (tar-zst-pipe: the agent streams the archive, the Worker uploads it in parts), checked by restoring it elsewhere. */
async function backupThenRestoreElsewhere(src: string, b: { snapshotId: string }) {
  const dst = freshSandbox("dst");
  await runWorkflow("restore", { snapshotId: b.snapshotId, sandboxId: dst, path: "/workspace/app" });
  expect((await manifest(dst, "/workspace/app")).entries).toEqual((await manifest(src, "/workspace/app")).entries);
}

describe("the archive stream (agent → Worker) cut or stalled mid-backup", () => {
  it("cut after 1 MB: the Worker's upload is aborted, the transfer step retries and the backup completes, verified", async () => {
    const src = await tree(8, 91);
    await armAgentFault(src, { method: "GET", match: "/v1/archive", action: "cut", afterBytes: 1_000_000 });
    const b = await timed(runWorkflow("backup", { sandboxId: src, path: "/workspace/app", strategy: "tar-zst-pipe", tuning: { partSizeMiB: 5 } }));
    expect(b.status).toBe("complete");
    expect((await firedAgentFaults(src, "/v1/archive")).map((f) => f.ended)).toEqual(["cut by the proxy"]);
    const streams = (await agentRequests(src, "/v1/archive")).filter((x) => x.startsWith("GET"));
    expect(streams).toHaveLength(2);
    await nothingLeftInStore(b.snapshotId);
    await backupThenRestoreElsewhere(src, b);
    faultRow({ fault: "archive stream cut after 1 MB (agent ⇄ Worker)", phase: "backup transfer (Worker multipart)", outcome: "complete, verified, restored equal", retries: `${streams.length - 1} (transfer step)`, ms: b.testMs, leftovers: await leftovers(src, "/workspace/app", b.snapshotId) });
  });

  it("stalled 40 s after 1 MB: aborted after 8 s of silence (agent_timeout), retried, complete, verified", async () => {
    const src = await tree(8, 92);
    await armAgentFault(src, { method: "GET", match: "/v1/archive", action: "stall", afterBytes: 1_000_000, ms: 40_000 });
    const b = await timed(runWorkflow("backup", { sandboxId: src, path: "/workspace/app", strategy: "tar-zst-pipe", tuning: { partSizeMiB: 5 } }));
    expect(b.status).toBe("complete");
    // The Worker's silence deadline gave up on the stream.
    expect((await firedAgentFaults(src, "/v1/archive")).map((f) => f.ended)).toEqual(["client went away"]);
    const streams = (await agentRequests(src, "/v1/archive")).filter((x) => x.startsWith("GET"));
    expect(streams).toHaveLength(2);
    // Cut at the silence bound, not waited out.
    expect(b.testMs).toBeGreaterThanOrEqual(8000);
    expect(b.testMs).toBeLessThan(35_000);
    // The aborted attempt stalled before its first part was full, and an upload is opened only once it is (a body
    // smaller than a part goes as one PUT: src/store/multipart-upload.ts): the retry's is the only one, none left open.
    const creates = (await storeRequests(`snapshots/${b.snapshotId}/archive`)).filter((x) => x.startsWith("POST") && x.includes("uploads"));
    expect(creates).toHaveLength(1);
    await nothingLeftInStore(b.snapshotId);
    await backupThenRestoreElsewhere(src, b);
    faultRow({ fault: "archive stream stalled 40 s after 1 MB (agent ⇄ Worker)", phase: "backup transfer (Worker multipart)", outcome: "aborted after 8 s of silence (agent_timeout), retried, complete, verified", retries: `${streams.length - 1} (transfer step)`, ms: b.testMs, leftovers: await leftovers(src, "/workspace/app", b.snapshotId) });
  });
});

describe("a restore's calls to the agent cut, stalled or refused", () => {
  /** A backup of a `mb` MB tree and a target sandbox holding another tree at /workspace/app. */
  async function snapshotAndOccupiedTarget(mb: number, seed: number) {
    const src = await tree(mb, seed);
    const b = await runWorkflow("backup", { sandboxId: src, path: "/workspace/app", strategy: "tar-zst-pipe" });
    const dst = freshSandbox("dst");
    await agent(dst, "POST", "/v1/datasets", { path: "/workspace/app", kind: "tricky", seed: seed + 1000 });
    return { src, dst, snapshotId: b.snapshotId as string, before: await manifest(dst, "/workspace/app") };
  }
  // push-pipe: the Worker streams the archive from the store into the agent's extractor (PUT /v1/extract).
  const restore = (snapshotId: string, dst: string, expected: "complete" | "errored" = "complete") =>
    timed(runWorkflow("restore", { snapshotId, sandboxId: dst, path: "/workspace/app", strategy: "restore-tar-zst-pipe", replace: true }, expected));

  it("the extract's request body cut after 1 MB: the transfer retries into a fresh staged tree; complete, verified", async () => {
    const { src, dst, snapshotId } = await snapshotAndOccupiedTarget(6, 93);
    await armAgentFault(dst, { method: "PUT", match: "/v1/extract", action: "cut", afterBytes: 1_000_000 });
    const r = await restore(snapshotId, dst);
    expect(r.status).toBe("complete");
    expect((await firedAgentFaults(dst, "/v1/extract")).map((f) => f.ended)).toEqual(["cut by the proxy"]);
    const extracts = await agentRequests(dst, "/v1/extract");
    expect(extracts).toHaveLength(2);
    expect((await manifest(dst, "/workspace/app")).entries).toEqual((await manifest(src, "/workspace/app")).entries);
    expect(await sandboxLeftovers(dst, "/workspace/app")).toEqual([]);
    faultRow({ fault: "extract request body cut after 1 MB (Worker ⇄ agent)", phase: "restore transfer (push-pipe)", outcome: "complete, verified", retries: `${extracts.length - 1} (transfer step)`, ms: r.testMs, leftovers: await leftovers(dst, "/workspace/app") });
  });

  it("the extract's request body stalled 40 s after 1 MB: aborted after 8 s of the agent taking nothing, retried, complete", async () => {
    // Bigger than the socket buffers between Worker, proxy and agent, so that the stall reaches the Worker.
    const { src, dst, snapshotId } = await snapshotAndOccupiedTarget(16, 94);
    await armAgentFault(dst, { method: "PUT", match: "/v1/extract", action: "stall", afterBytes: 1_000_000, ms: 40_000 });
    const r = await restore(snapshotId, dst);
    expect(r.status).toBe("complete");
    // The Worker's silence deadline gave up, not the agent hanging up on a request body that stopped (that would
    // show as "upstream failed"). The proxy itself sees the Worker leave only when the stall ends: the socket it
    // stopped reading cannot tell it sooner.
    const [fired] = await firedAgentFaults(dst, "/v1/extract");
    expect(fired?.ended ?? "not yet").toMatch(/^(client went away|not yet)$/);
    const extracts = await agentRequests(dst, "/v1/extract");
    expect(extracts).toHaveLength(2);
    expect(r.testMs).toBeGreaterThanOrEqual(8000);
    expect(r.testMs).toBeLessThan(35_000);
    expect((await manifest(dst, "/workspace/app")).entries).toEqual((await manifest(src, "/workspace/app")).entries);
    expect(await sandboxLeftovers(dst, "/workspace/app")).toEqual([]);
    faultRow({ fault: "extract request body stalled 40 s after 1 MB (Worker ⇄ agent)", phase: "restore transfer (push-pipe)", outcome: "aborted after 8 s of silence (agent_timeout), retried, complete", retries: `${extracts.length - 1} (transfer step)`, ms: r.testMs, leftovers: await leftovers(dst, "/workspace/app") });
  });

  it("the swap-in's answer stalled 40 s (the swap itself done): aborted at the 15 s call bound, the repeat continues from the journal; complete", async () => {
    const { src, dst, snapshotId } = await snapshotAndOccupiedTarget(2, 95);
    await armAgentFault(dst, { method: "POST", match: "/v1/swap/in", action: "stall", body: "response", afterBytes: 0, ms: 40_000 });
    const r = await restore(snapshotId, dst);
    expect(r.status).toBe("complete");
    // The Worker's deadline gave up on the answer (not the agent hanging up).
    expect((await firedAgentFaults(dst, "/v1/swap/in")).map((f) => f.ended)).toEqual(["client went away"]);
    const swaps = await agentRequests(dst, "/v1/swap/in");
    expect(swaps).toHaveLength(2);
    expect(r.testMs).toBeGreaterThanOrEqual(15_000);
    expect(r.testMs).toBeLessThan(38_000);
    expect(r.steps.verify).toMatchObject({ replaced: true });
    expect((await manifest(dst, "/workspace/app")).entries).toEqual((await manifest(src, "/workspace/app")).entries);
    expect(await sandboxLeftovers(dst, "/workspace/app")).toEqual([]);
    faultRow({ fault: "swap-in answer stalled 40 s (Worker ⇄ agent; the swap itself done)", phase: "restore verify", outcome: "aborted at the 15 s call bound (agent_timeout), repeated from the journal, complete, verified", retries: `${swaps.length - 1} (verify step)`, ms: r.testMs, leftovers: await leftovers(dst, "/workspace/app") });
  });

  it("every extract refused: the restore fails naming the refused connection; the old tree is as it was", async () => {
    const { dst, snapshotId, before } = await snapshotAndOccupiedTarget(2, 96);
    await armAgentFault(dst, { method: "PUT", match: "/v1/extract", action: "refuse", times: 20 });
    const r = await restore(snapshotId, dst, "errored");
    expect(r.error).toMatch(/extract: the connection to the agent in sandbox .* failed before its answer/);
    const refused = (await firedAgentFaults(dst, "/v1/extract")).length;
    expect(refused).toBeGreaterThanOrEqual(2);
    expect((await manifest(dst, "/workspace/app")).entries).toEqual(before.entries);
    expect(await sandboxLeftovers(dst, "/workspace/app")).toEqual([]);
    faultRow({ fault: "agent refuses every extract connection (Worker ⇄ agent)", phase: "restore transfer (push-pipe)", outcome: "failed, naming the refused connection; old tree intact", retries: refused - 1, ms: r.testMs, leftovers: await leftovers(dst, "/workspace/app") });
  });
});
