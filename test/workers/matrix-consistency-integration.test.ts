// A matrix's status is the store's, whoever writes it and in whatever order: the dead-letter consumer and the
// aggregator run concurrently in production (only the aggregator is serialised), so here many dead-letter
// records and aggregator runs interleave in one Promise.all, with real bindings (queues, Workflows) and the real
// S3 server. Nothing may be lost: every dead letter is in the status, the sent count never goes backwards, and
// done/failed are exactly what the stored run results say.
import { env } from "cloudflare:workers";
import { expect, it } from "vitest";
import { depsFrom } from "../../src/deps.ts";
import { aggregateMatrix } from "../../src/matrix/aggregate.ts";
import { recordDeadLetter } from "../../src/matrix/record-dead-letter.ts";
import { readMatrix } from "../../src/matrix/matrix-records.ts";
import { sendDueRuns } from "../../src/matrix/schedule.ts";
import { api, testStore } from "./helpers.ts";

const tricky = { name: "tricky", kind: "tricky", seed: 3 };

/** The run results as the store holds them, read here without the code under test. */
async function storedRuns(matrixId: string): Promise<{ done: number; failed: number }> {
  const store = await testStore();
  const keys: string[] = [];
  let cursor: string | undefined;
  do {
    const page = await store.list(`matrices/${matrixId}/runs/`, { cursor });
    keys.push(...page.objects.map((o) => o.key));
    cursor = page.cursor;
  } while (cursor);
  const runs = await Promise.all(keys.map(async (k) => (await new Response((await store.get(k))!.body).json()) as { ok: boolean }));
  return { done: runs.length, failed: runs.filter((r) => !r.ok).length };
}

async function status(id: string): Promise<any> {
  const r = await api("GET", `/api/matrices/${id}`);
  expect(r.status, JSON.stringify(r.json)).toBe(200);
  return r.json;
}

it("dead letters recorded while the aggregator runs are all kept; sent never goes back; done and failed are the stored runs'", async () => {
  const d = depsFrom(env);
  const started = await api("POST", "/api/matrices", { name: "interleaved", datasets: [tricky], backups: ["tar-zst-pipe"], restores: ["presigned-tar-zst-pipe"], runs: 6, dropCaches: false, concurrency: 1 });
  expect(started.status, JSON.stringify(started.json)).toBe(202);
  const id: string = started.json.id;
  const record = (await readMatrix(d.store, id))!;
  const cell = record.cells[0]!;

  // 24 poison messages naming the matrix (they record a dead letter only) and 5 dead run messages (each also
  // records a failed run and tells the real results queue, whose consumer aggregates beside the calls here).
  const letters = [
    ...Array.from({ length: 24 }, (_, i) => ({ id: `poison-${i}`, body: { type: "result", matrixId: id, runKey: i } as unknown })),
    ...[2, 3, 4, 5, 6].map((run) => ({ id: `dead-run-${run}`, body: { type: "cell", matrixId: id, cell, run } as unknown })),
  ];
  const sentSeen: number[] = [];
  let sampling = true;
  const sampler = (async () => {
    while (sampling) sentSeen.push((await status(id)).progress.sent);
  })();
  await Promise.all([
    ...letters.map((l) => recordDeadLetter(d, env.RESULTS_QUEUE, l.id, l.body)),
    ...Array.from({ length: 12 }, () => aggregateMatrix(d, env.MATRIX_QUEUE, id)),
    // Senders racing with stale views of `done`: the count may only move forward.
    ...[3, 0, 5, 1, 4, 2].map((done) => sendDueRuns(d, env.MATRIX_QUEUE, record, done)),
  ]);

  const right = await status(id);
  expect(right.progress.deadLettered).toHaveLength(letters.length);
  expect(right.progress.deadLettered.map((l: any) => l.message).sort()).toEqual(letters.map((l) => JSON.stringify(l.body)).sort());
  // Every run was sent (done + concurrency ≥ 6 for the largest stale view).
  expect(right.progress.sent).toBe(6);
  const now = await storedRuns(id);
  expect(right.progress.done).toBeLessThanOrEqual(now.done);
  expect(right.progress.done).toBeGreaterThanOrEqual(5);

  // The sent runs finish (real Workflows; their results may replace the dead-lettered ones).
  const deadline = Date.now() + 100_000;
  let last = right;
  while (last.progress.status !== "complete") {
    if (Date.now() > deadline) throw new Error(`matrix ${id} not complete: ${JSON.stringify(last.progress)}`);
    await new Promise((r) => setTimeout(r, 300));
    last = await status(id);
    sentSeen.push(last.progress.sent);
  }
  sampling = false;
  await sampler;
  // Let any aggregation still in flight settle, then compare with the store at rest.
  await new Promise((r) => setTimeout(r, 1500));
  const final = await status(id);
  const stored = await storedRuns(id);
  expect(final.progress).toMatchObject({ total: 6, done: stored.done, failed: stored.failed, sent: 6, status: "complete" });
  expect(final.progress.deadLettered).toHaveLength(letters.length);
  expect(final.summary).toMatchObject({ done: stored.done, failed: stored.failed });
  expect(sentSeen.length).toBeGreaterThan(1);
  sentSeen.forEach((s, i) => expect(s, `sent went from ${sentSeen[i - 1]} to ${s}`).toBeGreaterThanOrEqual(sentSeen[i - 1] ?? 0));
  console.log(`interleaved: ${letters.length} dead letters, 12 aggregator runs, 6 stale senders; sent samples ${sentSeen.length} (${[...new Set(sentSeen)].join(" → ")}); final done ${stored.done}, failed ${stored.failed}`);
});

it("a dead message naming no matrix is kept in the store, not in KV", async () => {
  const d = depsFrom(env);
  await recordDeadLetter(d, env.RESULTS_QUEUE, "orphan-1", { type: "cell", matrixId: "mx-no-such-matrix" });
  const o = await (await testStore()).get("dead-letters/orphan-1.json");
  expect(o).not.toBeNull();
  expect(await new Response(o!.body).json()).toMatchObject({ messageId: "orphan-1", reason: expect.stringMatching(/not a valid message/) });
});
