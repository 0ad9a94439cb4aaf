// The benchmark matrix end to end in workerd: HTTP and queue-driven starts, the real matrix and results queues,
// one BenchmarkCellWorkflow per run against the real agent and S3 server, the aggregator's summary, redelivery,
// a failing cell, poison messages and the cron trigger.
import { env } from "cloudflare:workers";
import { createExecutionContext, createMessageBatch, createScheduledController, getQueueResult, introspectWorkflow } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import worker from "../../worker.ts";
import { agent, api } from "./helpers.ts";

const tricky = { name: "tricky", kind: "tricky", seed: 3 };

/** Polls a matrix to completion, checking on the way that no more than `concurrency` runs were ever in flight. */
async function waitForMatrix(id: string, timeoutMs = 100_000): Promise<any> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const m = (await api("GET", `/api/matrices/${id}`)).json;
    if (m.progress) expect(m.progress.sent).toBeLessThanOrEqual(m.progress.done + m.spec.concurrency);
    if (m.progress?.status === "complete") return m;
    if (Date.now() > deadline) throw new Error(`matrix ${id} not complete: ${JSON.stringify(m.progress)}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

async function runQueue(queue: string, messages: { id: string; body: unknown; attempts?: number }[]) {
  const batch = createMessageBatch(queue, messages.map((m) => ({ id: m.id, timestamp: Date.now(), attempts: m.attempts ?? 1, body: m.body })));
  const ctx = createExecutionContext();
  await worker.queue(batch, env, ctx);
  return getQueueResult(batch, ctx);
}

describe("a matrix", () => {
  it("fans out one run per cell × run, aggregates medians, and a redelivered message starts and counts nothing twice", async () => {
    await using cells = await introspectWorkflow(env.CELL_WORKFLOW);
    const started = await api("POST", "/api/matrices", {
      name: "two-cells", datasets: [tricky], backups: ["tar-zst-pipe"], restores: ["presigned-tar-zst-pipe", "restore-tar-zst-pipe"], runs: 2, dropCaches: false, concurrency: 2,
    });
    expect(started.status, JSON.stringify(started.json)).toBe(202);
    expect(started.json).toMatchObject({ cells: 2, runs: 4 });
    const done = await waitForMatrix(started.json.id);
    expect(done.progress).toMatchObject({ total: 4, done: 4, failed: 0, status: "complete" });
    expect(await cells.get()).toHaveLength(4);
    for (const row of done.summary.rows) {
      expect(row.n).toBe(2);
      expect(row.phases["backup.total"].n).toBe(2);
      expect(row.phases["backup.total"].min).toBeLessThanOrEqual(row.phases["backup.total"].median);
      expect(row.phases["restore.total"].max).toBeGreaterThanOrEqual(row.phases["restore.total"].median);
      expect(row.archiveBytes).toBeGreaterThan(0);
    }

    // Redeliver a cell message and a result message, twice each: nothing new starts, nothing counts twice.
    const cell = { type: "cell", matrixId: started.json.id, cell: done.cells[0], run: 1 };
    const q = await runQueue("snapflow-matrix", [{ id: "dup-1", body: cell }, { id: "dup-2", body: cell }]);
    expect(q.explicitAcks.sort()).toEqual(["dup-1", "dup-2"]);
    const result = { type: "result", matrixId: started.json.id, runKey: `${started.json.id}-c0-r1` };
    await runQueue("snapflow-results", [{ id: "res-1", body: result }, { id: "res-2", body: result }]);
    const again = (await api("GET", `/api/matrices/${started.json.id}`)).json;
    expect(again.progress).toMatchObject({ total: 4, done: 4, failed: 0 });
    expect(again.summary.rows.map((r: any) => r.n)).toEqual([2, 2]);
    expect(await cells.get()).toHaveLength(4);

    const history = (await api("GET", "/api/matrices")).json.matrices.map((m: any) => m.id);
    expect(history).toContain(started.json.id);

    // The results page: the table and the chart, no external resources, through a signed link (security-integration.test.ts).
    const link = new URL((await api("POST", `/api/matrices/${started.json.id}/link`, {})).json.url);
    const page = await worker.fetch(new Request(`http://snapflow.test${link.pathname}${link.search}`), env);
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain("<svg");
    expect(html).toContain(`<td>${done.cells[1].restore}</td>`);
    expect(html).toMatch(/4 of 4 runs done, 0 failed — complete/);
    expect(html).not.toMatch(/<script[^>]+src=|<link[^>]+href=/);
    expect((await worker.fetch(new Request(`http://snapflow.test/matrices/${started.json.id}?token=${env.API_TOKEN}`), env)).status).toBe(401);
  });

  it("a failing cell is a failure with its error, and the matrix still completes (queue-driven start)", async () => {
    await using cells = await introspectWorkflow(env.CELL_WORKFLOW);
    await cells.modifyAll(async (m) => m.disableRetryDelays());
    const id = `mx-test-fail-${Date.now().toString(36)}`;
    // Runs go one at a time from a shared source sandbox: its next 4 archive requests (run 1's transfer step and
    // its 3 retries) answer 503, so run 1 fails and run 2 is healthy.
    await agent(`${id}-d0`, "POST", "/v1/faults", { route: "GET /v1/archive", times: 4 });
    await env.MATRIX_QUEUE.send({ type: "start", id, spec: { name: "one-bad-run", datasets: [tricky], backups: ["tar-zst-pipe"], restores: ["presigned-tar-zst-pipe"], runs: 2, dropCaches: false } });
    const done = await waitForMatrix(id);
    expect(done.progress).toMatchObject({ total: 2, done: 2, failed: 1, trigger: "queue", sent: 2 });
    const [row] = done.summary.rows;
    expect(row.n).toBe(1);
    expect(row.failures).toEqual([{ run: 1, error: expect.stringMatching(/injected fault/) }]);
  });
});

it("a poison message is retried, then recorded with its reason in the matrix's status", async () => {
  const started = await api("POST", "/api/matrices", { name: "poison", datasets: [tricky], backups: ["tar-zst-pipe"], restores: ["presigned-tar-zst-pipe"], runs: 1, dropCaches: false });
  const poison = { type: "cell", matrixId: started.json.id, cell: { index: "zero" }, run: 1 };
  const first = await runQueue("snapflow-matrix", [{ id: "poison-1", body: poison }]);
  expect(first.retryMessages.map((m) => m.msgId)).toEqual(["poison-1"]);
  await runQueue("snapflow-dlq", [{ id: "poison-1", body: poison, attempts: 4 }]);
  const m = (await api("GET", `/api/matrices/${started.json.id}`)).json;
  expect(m.progress.deadLettered).toEqual([{ reason: expect.stringMatching(/cell\.index/), message: expect.stringContaining("zero") }]);
  await waitForMatrix(started.json.id);
});

it("the cron trigger starts the nightly preset and marks it latest", async () => {
  const ctrl = createScheduledController({ scheduledTime: new Date("2026-11-22T03:00:00Z"), cron: "0 3 * * *" });
  await worker.scheduled(ctrl, env, createExecutionContext());
  const latest = await env.INDEX.get("nightly:latest");
  expect(latest).toBe(`nightly-${env.NIGHTLY_MATRIX}-20261122`);
  const m = (await api("GET", `/api/matrices/${latest}`)).json;
  expect(m.spec.name).toBe(env.NIGHTLY_MATRIX);
  expect(m.progress).toMatchObject({ trigger: "cron", total: m.cells.length * m.spec.runs });
});

it("explicit pairs make the cells, and a pair that cannot work is refused naming it", async () => {
  const ok = await api("POST", "/api/matrices", { name: "pairs", datasets: [tricky], backups: ["tar-zst-pipe", "squashfs-lz4"], pairs: [{ backup: "squashfs-lz4", restore: "presigned-squashfuse-mount" }], runs: 1, dropCaches: false });
  expect(ok.json).toMatchObject({ cells: 1, runs: 1 });
  const done = await waitForMatrix(ok.json.id);
  expect(done.summary.rows[0]).toMatchObject({ n: 1, cell: { backup: "squashfs-lz4", restore: "presigned-squashfuse-mount" } });
  const bad = await api("POST", "/api/matrices", { name: "pairs", datasets: [tricky], backups: ["tar-zst-pipe"], pairs: [{ backup: "tar-zst-pipe", restore: "presigned-squashfuse-mount" }] });
  expect(bad.status).toBe(400);
  expect(bad.json.error.field).toBe("pairs.0.restore");
});

it("a bad matrix spec is a 400 naming the field", async () => {
  const r = await api("POST", "/api/matrices", { name: "x", datasets: [tricky], backups: ["no-such-preset"] });
  expect(r.status).toBe(400);
  expect(r.json.error.field).toBe("backups.0");
});
