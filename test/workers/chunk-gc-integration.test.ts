// The chunk collector against real chunked snapshots in the real store (issue 10): it never deletes a chunk that a
// kept snapshot's index names, nor one written within the grace period; deleting a snapshot removes its index, and
// then the collector removes the chunks that only it had — the kept snapshot still restores whole.
import { env } from "cloudflare:workers";
import { afterAll, expect, it } from "vitest";
import { readIndex } from "../../src/chunks/chunk-index.ts";
import { chunkKey } from "../../src/chunks/chunk-keys.ts";
import { collectStore } from "../../src/chunks/collect-store.ts";
import { depsFrom } from "../../src/deps.ts";
import type { SnapshotRecord } from "../../src/snapshots/records.ts";
import { agent, api, freshSandbox, putFile, runWorkflow as run, sha256Hex } from "./helpers.ts";

const d = depsFrom(env);
const APP = "/workspace/app";
const used: string[] = [];
afterAll(async () => {
  for (const sandbox of used) await agent(sandbox, "DELETE", "/v1/sandbox").catch(() => {});
});

async function chunksOf(id: string): Promise<Set<string>> {
  const record = (await api("GET", `/api/snapshots/${id}`)).json as SnapshotRecord;
  return new Set((await readIndex(d.store, record.archive.key, record.archive.sha256)).chunks.map((c) => c.sha256));
}
const present = async (digest: string) => (await d.store.head(chunkKey("default", digest))) !== null;
const gc = (body: unknown) => api("POST", "/api/chunks/gc", body);

it("keeps every chunk a kept snapshot needs and every young chunk; frees what only a deleted snapshot had", async () => {
  const src = freshSandbox("src");
  used.push(src);
  await agent(src, "POST", "/v1/datasets", { path: APP, kind: "added-data", seed: 41, files: 300, bytes: 2e6, addedBytes: 5e6 });
  const a = await run("backup", { sandboxId: src, path: APP, strategy: "squashfs-chunked" });
  await putFile(src, `${APP}/zz-later/notes.txt`, "written between the two backups\n".repeat(2000));
  const b = await run("backup", { sandboxId: src, path: APP, strategy: "squashfs-chunked" });
  const [ofA, ofB] = [await chunksOf(a.snapshotId), await chunksOf(b.snapshotId)];
  const onlyA = [...ofA].filter((x) => !ofB.has(x));
  expect(onlyA.length).toBeGreaterThan(0);
  expect([...ofA].filter((x) => ofB.has(x)).length).toBeGreaterThan(0);

  // A chunk nothing references, just written: what a backup uploads before its index names it looks like this.
  const stray = crypto.getRandomValues(new Uint8Array(4096));
  const strayDigest = await sha256Hex(stray);
  await d.store.put(chunkKey("default", strayDigest), stray);

  const graced = await gc({ graceSeconds: 3600 });
  expect(graced.status).toBe(200);
  expect(graced.json.chunks.young).toBeGreaterThanOrEqual(1);
  expect(await present(strayDigest)).toBe(true);

  const eager = await gc({ graceSeconds: 0 });
  console.log(`gc, grace 0, both snapshots kept: ${JSON.stringify(eager.json)}`);
  expect(await present(strayDigest)).toBe(false);
  for (const x of [...ofA, ...ofB]) expect(await present(x), x).toBe(true);

  // Deleting A removes its index (nothing references A's own chunks any more) and not a single chunk by itself.
  const aRecord = (await api("GET", `/api/snapshots/${a.snapshotId}`)).json as SnapshotRecord;
  expect((await api("DELETE", `/api/snapshots/${a.snapshotId}`)).status).toBe(200);
  expect(await d.store.head(aRecord.archive.key)).toBeNull();
  for (const x of onlyA) expect(await present(x)).toBe(true);

  const afterDelete = await gc({ graceSeconds: 0 });
  console.log(`gc, grace 0, after deleting the first snapshot: ${JSON.stringify(afterDelete.json)}`);
  expect(afterDelete.json.chunks.deleted).toBeGreaterThanOrEqual(onlyA.length);
  for (const x of onlyA) expect(await present(x)).toBe(false);
  for (const x of ofB) expect(await present(x), x).toBe(true);

  // B is whole: a lazy restore reads every one of its chunks.
  const dst = freshSandbox("dst");
  used.push(dst);
  await run("restore", { snapshotId: b.snapshotId, sandboxId: dst, path: APP, strategy: "lazy-squashfs" });
  expect((await agent(dst, "POST", "/v1/manifest", { path: APP })).entries).toEqual((await agent(src, "POST", "/v1/manifest", { path: APP })).entries);
});

it("a dry run deletes nothing, and bad input is refused naming the field", async () => {
  const stray = crypto.getRandomValues(new Uint8Array(1024));
  const digest = await sha256Hex(stray);
  await d.store.put(chunkKey("default", digest), stray);
  const dry = await gc({ graceSeconds: 0, dryRun: true });
  expect(dry.json.dryRun).toBe(true);
  expect(dry.json.chunks.deleted).toBeGreaterThanOrEqual(1);
  expect(await present(digest)).toBe(true);
  await gc({ graceSeconds: 0 });
  expect(await present(digest)).toBe(false);

  for (const [body, field] of [[{ graceSeconds: -1 }, "graceSeconds"], [{ graceSeconds: 1.5 }, "graceSeconds"], [{ dryRun: "yes" }, "dryRun"], [{ grace: 5 }, "body"]] as const) {
    const r = await gc(body);
    expect(r.status, JSON.stringify(body)).toBe(400);
    expect(r.json.error.field, JSON.stringify(body)).toBe(field);
  }
});

it("the chunk and the pack collector, run together, list snapshots/ twice between them and read each record once", async () => {
  // A recorded chunked snapshot and a recorded file-level one, so that both collectors have records to read.
  const src = freshSandbox("src");
  used.push(src);
  await agent(src, "POST", "/v1/datasets", { path: APP, kind: "added-data", seed: 43, files: 20, bytes: 100_000, addedBytes: 1e6 });
  await run("backup", { sandboxId: src, path: APP, strategy: "squashfs-chunked" });
  await run("backup", { sandboxId: src, path: APP, strategy: "files-cas" });
  // The real store, its calls counted (not a stand-in: every call goes through to it).
  const listed: string[] = [];
  const read = new Map<string, number>();
  const store = new Proxy(d.store, {
    get(target, name, receiver) {
      if (name === "list") return (prefix: string, o?: { cursor?: string }) => (o?.cursor || listed.push(prefix), target.list(prefix, o));
      if (name === "get") return (key: string, range?: unknown) => (read.set(key, (read.get(key) ?? 0) + 1), target.get(key, range as never));
      return Reflect.get(target, name, receiver);
    },
  });
  const { chunks, packs } = await collectStore({ ...d, store }, { dryRun: true });
  expect(chunks.indexes.recorded).toBeGreaterThanOrEqual(1);
  expect(packs.records.read).toBeGreaterThanOrEqual(2);
  // The mark's listing and the recheck's: once each for both collectors (each alone lists twice).
  expect(listed.filter((x) => x === "snapshots/")).toHaveLength(2);
  const records = [...read].filter(([key]) => /^snapshots\/[^/]+\/snapshot\.json$/.test(key));
  expect(records.length).toBeGreaterThanOrEqual(2);
  expect(records.filter(([, n]) => n > 1)).toEqual([]);
});
