// The index stays true: a seeded random sequence of creates (full snapshots and deltas, some with a ttl), expiries
// (the lifecycle cron handler with its scheduled time past the ttls) and deletes (with and without cascade) runs
// against the real agent and S3 server; after every operation KV's index holds exactly the snapshots whose records
// are in the store, and a deleted snapshot has no object left. (The bucket is shared with other test files: the
// comparison covers the ids this sequence made.)
import { env } from "cloudflare:workers";
import { createExecutionContext, createScheduledController } from "cloudflare:test";
import { expect, it } from "vitest";
import { LIFECYCLE_CRON } from "../../src/snapshots/lifecycle-cron.ts";
import { s3Store } from "../../src/store/s3-store.ts";
import worker from "../../worker.ts";
import { agent, api, freshSandbox, putFile, runWorkflow } from "./helpers.ts";

const store = s3Store({ endpoint: env.S3_ENDPOINT, bucket: env.S3_BUCKET, region: "auto", accessKeyId: env.S3_ACCESS_KEY_ID, secretAccessKey: env.S3_SECRET_ACCESS_KEY });

/** mulberry32: a small seeded generator, so a failing sequence can be replayed. */
function random(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

async function kvIds(): Promise<Set<string>> {
  const ids = new Set<string>();
  let cursor: string | undefined;
  do {
    const r = await env.INDEX.list({ prefix: "snapshot:", cursor });
    r.keys.forEach((k) => ids.add(k.name.slice("snapshot:".length)));
    cursor = r.list_complete ? undefined : r.cursor;
  } while (cursor);
  return ids;
}

async function storeIds(made: string[]): Promise<Set<string>> {
  const ids = new Set<string>();
  for (const id of made) if (await store.head(`snapshots/${id}/snapshot.json`)) ids.add(id);
  return ids;
}

const SEED = 1123;
const OPS = 18;

it(`KV and the store agree after a random sequence of ${OPS} creates, expiries and deletes (seed ${SEED})`, async () => {
  const rand = random(SEED);
  const pick = <T>(xs: T[]) => xs[Math.floor(rand() * xs.length)]!;
  const src = freshSandbox("idx");
  await agent(src, "POST", "/v1/datasets", { path: "/workspace/app", kind: "tricky", seed: 4 });
  const made: string[] = [];
  const log: string[] = [];
  let clock = Date.now();

  for (let i = 0; i < OPS; i++) {
    const live = [...(await storeIds(made))];
    const roll = rand();
    if (roll < 0.5 || !live.length) {
      await putFile(src, `/workspace/app/op-${i}.txt`, `change ${i}`);
      const delta = live.length && rand() < 0.5;
      const body = { sandboxId: src, path: "/workspace/app", ...(delta ? { strategy: "tar-zst-delta", baseSnapshotId: pick(live) } : { strategy: "tar-zst-pipe" }), ...(rand() < 0.4 ? { ttl: "1h" } : {}) };
      const id = (await runWorkflow("backup", body)).snapshotId;
      made.push(id);
      log.push(`create ${id}${delta ? ` on ${body.baseSnapshotId}` : ""}${"ttl" in body ? " ttl 1h" : ""}`);
    } else if (roll < 0.7) {
      clock += 2 * 3600_000;
      await worker.scheduled(createScheduledController({ scheduledTime: new Date(clock), cron: LIFECYCLE_CRON }), env, createExecutionContext());
      const report = (await api("GET", "/api/retention")).json;
      log.push(`expire at +${Math.round((clock - Date.now()) / 3600_000)}h: removed ${report.removed.map((r: any) => r.id).join(", ") || "none"}`);
    } else {
      const id = pick(live);
      const cascade = rand() < 0.5;
      const r = await api("DELETE", `/api/snapshots/${id}`, cascade ? { cascade: true } : undefined);
      expect([200, 409], JSON.stringify(r.json)).toContain(r.status);
      log.push(`delete ${id}${cascade ? " --cascade" : ""}: ${r.status}${r.status === 409 ? ` (${r.json.error.message})` : ` ${r.json.deleted.join(", ")}`}`);
    }
    const [inKv, inStore] = [await kvIds(), await storeIds(made)];
    expect([...inKv].filter((id) => made.includes(id)).sort(), log.join("\n")).toEqual([...inStore].sort());
    for (const id of made.filter((x) => !inStore.has(x))) {
      expect((await store.list(`snapshots/${id}/`)).objects.map((o) => o.key), `${id} deleted but objects remain\n${log.join("\n")}`).toEqual([]);
    }
  }
  console.log(log.join("\n"));
  // The sequence exercised every operation.
  expect(log.some((l) => l.startsWith("create"))).toBe(true);
  expect(log.some((l) => l.startsWith("expire"))).toBe(true);
  expect(log.some((l) => l.startsWith("delete"))).toBe(true);
});

it("the cron's reconcile drops an index entry whose record is gone and re-indexes a record KV lost", async () => {
  const src = freshSandbox("idx-repair");
  await agent(src, "POST", "/v1/datasets", { path: "/workspace/app", kind: "tricky", seed: 5 });
  const lost = (await runWorkflow("backup", { sandboxId: src, path: "/workspace/app" })).snapshotId;
  const ghost = (await runWorkflow("backup", { sandboxId: src, path: "/workspace/app" })).snapshotId;
  // Break both halves the way interrupted writes would: KV loses one entry, the store loses the other's record.
  await env.INDEX.delete(`snapshot:${lost}`);
  await store.delete(`snapshots/${ghost}/snapshot.json`);
  await worker.scheduled(createScheduledController({ scheduledTime: new Date(), cron: LIFECYCLE_CRON }), env, createExecutionContext());
  const report = (await api("GET", "/api/retention")).json;
  expect(report.reconciled.dropped).toContain(ghost);
  expect(report.reconciled.reindexed).toContain(lost);
  expect(await env.INDEX.get(`snapshot:${ghost}`)).toBeNull();
  expect((await env.INDEX.getWithMetadata<any>(`snapshot:${lost}`)).metadata).toMatchObject({ id: lost });
  // The ghost's leftover objects go with a delete, which answers for what it finished.
  expect((await api("DELETE", `/api/snapshots/${ghost}`)).json).toEqual({ deleted: [ghost] });
  expect((await store.list(`snapshots/${ghost}/`)).objects).toEqual([]);
});
