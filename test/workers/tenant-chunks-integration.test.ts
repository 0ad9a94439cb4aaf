// Per-tenant chunk namespaces (issue 21 case 3, docs/security.md): dedup tells a backup which chunks the store already
// holds (it gets PUT URLs for the others only), so with one namespace for the whole deployment a sandbox that can
// guess content learns whether ANY snapshot holds it. Chunks now live under their tenant's prefix (the default
// tenant keeps chunks/<sha256>): "present" says only that the asking tenant's own snapshots hold it. Through the real
// Workflows, agent and store; the collector keeps each tenant's chunks for its own snapshots only.
import { env } from "cloudflare:workers";
import { expect, it } from "vitest";
import { readIndex } from "../../src/chunks/chunk-index.ts";
import { chunkKey } from "../../src/chunks/chunk-keys.ts";
import { depsFrom } from "../../src/deps.ts";
import type { SnapshotRecord } from "../../src/snapshots/records.ts";
import { agent, api, runWorkflow as run, sandboxesDeletedAfterAll } from "./helpers.ts";

const d = depsFrom(env);
const APP = "/workspace/app";
const A = "acme-1";
const B = "globex";
const sandbox = sandboxesDeletedAfterAll();
const record = async (id: string) => (await api("GET", `/api/snapshots/${id}`)).json as SnapshotRecord;
const manifest = (sandbox: string) => agent(sandbox, "POST", "/v1/manifest", { path: APP });
async function digestsOf(id: string): Promise<string[]> {
  const r = await record(id);
  return [...new Set((await readIndex(d.store, r.archive.key, r.archive.sha256)).chunks.map((c) => c.sha256))];
}
const present = async (tenant: string, digest: string) => (await d.store.head(chunkKey(tenant, digest))) !== null;

/** The same tree in a fresh sandbox: the dataset generator gives the same bytes, names, modes and mtimes per seed. */
async function sameTree(label: string): Promise<string> {
  const sb = sandbox(label);
  await agent(sb, "POST", "/v1/datasets", { path: APP, kind: "added-data", seed: 71, files: 300, bytes: 2e6, addedBytes: 5e6 });
  return sb;
}

let snapshots: { a: string; b: string; a2: string; source: string } | undefined;

it("dedup-oracle-across-tenants: another tenant's backup of the same tree uploads every chunk; the same tenant's uploads only what changed", async () => {
  const a1 = await sameTree("a1");
  const first = await run("backup", { sandboxId: a1, path: APP, strategy: "squashfs-chunked", tenant: A });
  const one = (await record(first.snapshotId)).chunks!;
  expect(one.distinct).toBeGreaterThan(4);

  const b1 = await sameTree("b1");
  const other = await run("backup", { sandboxId: b1, path: APP, strategy: "squashfs-chunked", tenant: B });
  const two = (await record(other.snapshotId)).chunks!;

  const a2 = await sameTree("a2");
  const again = await run("backup", { sandboxId: a2, path: APP, strategy: "squashfs-chunked", tenant: A });
  const three = (await record(again.snapshotId)).chunks!;
  console.log(`tenant ${A}: uploaded ${one.uploadedChunks}/${one.distinct} chunks; tenant ${B}, same tree, another sandbox: uploaded ${two.uploadedChunks}/${two.distinct} chunks; tenant ${A} again, another sandbox: uploaded ${three.uploadedChunks}/${three.distinct} chunks`);

  // B learns nothing from A's chunks: it is given a URL for every one of its own, and they are stored under B.
  expect(two.uploadedChunks).toBe(two.distinct);
  expect((await record(other.snapshotId)).tenant).toBe(B);
  // A's dedup is kept: only the chunks holding the image's metadata go up again. The superblock holds the image's
  // making time, and the inode table the symlinks' mtimes, which the dataset generator leaves to the clock: one or
  // two chunks, as the second boundaries fall (seen: 1 and 2 of 10). Never the content's.
  expect(three.uploadedChunks).toBeLessThanOrEqual(2);
  expect(three.uploadedChunks).toBeLessThan(two.uploadedChunks / 2);
  const [ofA, ofB] = [await digestsOf(first.snapshotId), await digestsOf(other.snapshotId)];
  for (const x of ofB) expect(await present(B, x), x).toBe(true);
  for (const x of ofA) expect(await present(A, x), x).toBe(true);
  // Neither tenant's chunks were written under the default tenant's keys by these backups' namespaces.
  expect(chunkKey(B, ofB[0]!)).toBe(`chunks/t/${B}/${ofB[0]}`);

  // Both restore lazily, each from its own tenant's chunks, and hold their source's tree (the generator sets no
  // symlink's mtime: that is where two generations of the tree differ, in the image's tables).
  for (const [id, tenant, src] of [[first.snapshotId, A, a1], [other.snapshotId, B, b1]] as const) {
    const dst = sandbox("dst");
    await run("restore", { snapshotId: id, sandboxId: dst, path: APP, strategy: "lazy-squashfs", tenant });
    expect((await manifest(dst)).entries).toEqual((await manifest(src)).entries);
  }
  snapshots = { a: first.snapshotId, b: other.snapshotId, a2: again.snapshotId, source: a1 };
});

it("a restore naming another tenant than the snapshot's is refused as if the snapshot did not exist (404)", async () => {
  expect(snapshots).toBeDefined();
  const dst = sandbox("wrong");
  for (const [id, tenant] of [[snapshots!.b, A], [snapshots!.a, B], [snapshots!.a, "default"]] as const) {
    const r = await api("POST", "/api/restores", { snapshotId: id, sandboxId: dst, path: APP, strategy: "lazy-squashfs", tenant });
    expect(r.status, `${id} as ${tenant}`).toBe(404);
    expect(r.json.error).toMatchObject({ code: "not_found", field: "snapshotId" });
    expect(r.json.error.message).not.toContain(B);
  }
  // The field is the platform's, validated like any: not a path, not a key segment of the caller's choosing.
  for (const tenant of ["", "A", "a/b", "../x", "a".repeat(64), "a.b"]) {
    const r = await api("POST", "/api/restores", { snapshotId: snapshots!.a, sandboxId: dst, path: APP, tenant });
    expect(r.status, JSON.stringify(tenant)).toBe(400);
    expect(r.json.error.field, JSON.stringify(tenant)).toBe("tenant");
  }
});

it("the collector keeps each tenant's chunks while its snapshots exist, and frees tenant B's alone when B's snapshot is deleted", async () => {
  expect(snapshots).toBeDefined();
  const { a, b, a2 } = snapshots!;
  const [ofA, ofA2, ofB] = [await digestsOf(a), await digestsOf(a2), await digestsOf(b)];
  const gc = (body: unknown) => api("POST", "/api/chunks/gc", body);

  const kept = await gc({ graceSeconds: 0 });
  expect(kept.status).toBe(200);
  for (const x of [...ofA, ...ofA2]) expect(await present(A, x), x).toBe(true);
  for (const x of ofB) expect(await present(B, x), x).toBe(true);

  expect((await api("DELETE", `/api/snapshots/${b}`)).status).toBe(200);
  const freed = await gc({ graceSeconds: 0 });
  console.log(`gc after deleting tenant ${B}'s snapshot: ${JSON.stringify(freed.json)}`);
  expect(freed.json.chunks.deleted).toBeGreaterThanOrEqual(ofB.length);
  for (const x of ofB) expect(await present(B, x), x).toBe(false);
  // A's chunks are the same content, under A's own keys: none was touched.
  for (const x of [...ofA, ...ofA2]) expect(await present(A, x), x).toBe(true);

  // And A still restores whole.
  const dst = sandbox("after-gc");
  await run("restore", { snapshotId: a, sandboxId: dst, path: APP, strategy: "lazy-squashfs", tenant: A });
  expect((await manifest(dst)).entries).toEqual((await manifest(snapshots!.source)).entries);
});
