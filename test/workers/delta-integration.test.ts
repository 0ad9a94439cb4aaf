// Changed-files deltas end to end: a full snapshot, then deltas holding only what changed (computed from the
// previous snapshot's manifest), restored as base + deltas into a fresh sandbox and verified against the tree
// as it was at the last delta. Real agent, real tar/zstd, real S3 server.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { baseManifestSource } from "../../src/backup/single-pass.ts";
import { depsFrom } from "../../src/deps.ts";
import { MAX_LAYER_CHAIN } from "../../src/snapshots/layer-chain.ts";
import { getJson, manifestKey, putJson, snapshotRecordKey, type SnapshotRecord } from "../../src/snapshots/records.ts";
import { agent, api, freshSandbox, putFile as put, runWorkflow as run, storeRequests, testStore } from "./helpers.ts";

/** The stored manifest object of a snapshot: its size, and its JSON. */
async function storedManifest(id: string): Promise<{ bytes: number; json: any }> {
  const o = await (await testStore()).get(`snapshots/${id}/manifest.json`);
  const text = await new Response(o!.body).text();
  return { bytes: new TextEncoder().encode(text).byteLength, json: JSON.parse(text) };
}


const remove = (sandbox: string, path: string) => agent(sandbox, "DELETE", `/v1/files?path=${encodeURIComponent(path)}`);
const manifest = (sandbox: string) => agent(sandbox, "POST", "/v1/manifest", { path: "/workspace/app" });

describe("changed-files deltas", () => {
  it("base + two deltas restore to the tree as it was at the last delta, and a delta holds only the changes", async () => {
    const src = freshSandbox("src");
    await agent(src, "POST", "/v1/datasets", { path: "/workspace/app", kind: "node-modules", seed: 3, files: 400, bytes: 4_000_000 });
    const full = await run("backup", { sandboxId: src, path: "/workspace/app", strategy: "tar-zst-pipe" });
    const before = await manifest(src);
    const someFile = before.entries.find((e: any) => e.type === "file" && e.path.startsWith("node_modules/") && e.size > 1000).path;
    const someDir = before.entries.find((e: any) => e.type === "dir" && e.path.split("/").length === 2 && e.path.startsWith("node_modules/pkg-")).path;

    // First round of changes: edit, add (in a new directory), delete a file, delete a directory.
    await put(src, `/workspace/app/${someFile}`, "edited\n");
    await put(src, "/workspace/app/src/new-dir/new-file.ts", "export const added = 1;\n");
    await remove(src, "/workspace/app/package.json");
    await remove(src, `/workspace/app/${someDir}`);
    const d1 = await run("backup", { sandboxId: src, path: "/workspace/app", strategy: "tar-zst-delta", baseSnapshotId: full.snapshotId });
    expect(d1.status, d1.error).toBe("complete");
    // The sandbox's engine PUT the delta's parts itself (no byte through the Worker), to URLs signed for the base's
    // tree (its record's totals: no walk to size them).
    expect({ by: d1.steps.transfer.uploadedBy, sizeBy: d1.steps.transfer.sizeBy, sizeMs: d1.steps.transfer.sizeMs }).toEqual({ by: "engine", sizeBy: "base", sizeMs: 0 });
    const d1Record = (await api("GET", `/api/snapshots/${d1.snapshotId}`)).json;
    expect(d1Record.delta.base).toBe(full.snapshotId);
    expect(d1Record.delta.deleted).toBeGreaterThanOrEqual(2);
    expect(d1Record.archive.bytes).toBeLessThan(full.steps.transfer.bytes / 4);
    // Its stored manifest is a layer over the base's (what changed, and the deletions), not the whole tree again;
    // the record keeps the tree's totals, the layer's SHA-256 and the snapshot it lies over.
    const baseStored = await storedManifest(full.snapshotId);
    const d1Stored = await storedManifest(d1.snapshotId);
    expect(d1Record.manifest.layerOf).toBe(full.snapshotId);
    expect(d1Record.manifest.sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(d1Stored.json.version).toBe(2);
    expect(d1Stored.json.removed).toContain("package.json");
    expect(d1Stored.bytes).toBeLessThan(baseStored.bytes / 10);
    expect(d1Record.manifest.files).toBe((await manifest(src)).totals.files);
    const atD1 = await manifest(src);

    // Second round on top of the first delta.
    await put(src, "/workspace/app/src/new-dir/new-file.ts", "export const added = 2;\n");
    await put(src, "/workspace/app/package.json", "{\"name\":\"back\"}\n");
    const d2 = await run("backup", { sandboxId: src, path: "/workspace/app", strategy: "tar-zst-delta", baseSnapshotId: d1.snapshotId });
    expect(d2.status, d2.error).toBe("complete");
    const expected = await manifest(src);
    // A delta of a delta: its layer lies over the first delta's layer, which lies over the full manifest.
    const d2Record = (await api("GET", `/api/snapshots/${d2.snapshotId}`)).json;
    expect(d2Record.manifest.layerOf).toBe(d1.snapshotId);
    expect((await storedManifest(d2.snapshotId)).json.base).toBe(d1.snapshotId);

    for (const strategy of ["presigned-tar-zst-pipe", "restore-tar-zst-pipe"]) {
      const dst = freshSandbox("dst");
      const r = await run("restore", { snapshotId: d2.snapshotId, sandboxId: dst, path: "/workspace/app", strategy });
      expect(r.status, r.error).toBe("complete");
      expect(r.steps.transfer.layers).toBe(3);
      expect((await manifest(dst)).entries).toEqual(expected.entries);
    }
    // The first delta alone restores exactly too (base + one layer), every file hashed against base + layer.
    const dst1 = freshSandbox("dst");
    const r1 = await run("restore", { snapshotId: d1.snapshotId, sandboxId: dst1, path: "/workspace/app", strategy: "presigned-tar-zst-pipe", deepVerify: true });
    expect(r1.steps.transfer.layers).toBe(2);
    expect((await manifest(dst1)).entries).toEqual(atD1.entries);
  });

  it("the next delta reads its base from the manifest the sandbox kept, not the store; a changed copy is read from the store", async () => {
    const src = freshSandbox("src");
    await agent(src, "POST", "/v1/datasets", { path: "/workspace/app", kind: "node-modules", seed: 5, files: 200, bytes: 1_000_000 });
    const full = await run("backup", { sandboxId: src, path: "/workspace/app", strategy: "tar-zst-pipe" });
    const gets = async (id: string) => (await storeRequests(`snapshots/${id}/manifest.json`)).filter((r) => r.startsWith("GET"));
    const delta = async (base: string, change: string) => {
      await put(src, "/workspace/app/src/changed.ts", change);
      const d = await run("backup", { sandboxId: src, path: "/workspace/app", strategy: "tar-zst-delta", baseSnapshotId: base });
      expect(d.status, d.error).toBe("complete");
      return d;
    };

    // After a full backup and a delta of it: no GET of either base manifest.
    const d1 = await delta(full.snapshotId, "1");
    const d2 = await delta(d1.snapshotId, "2");
    expect(d1.steps.transfer.delta.baseFrom).toBe("kept");
    expect(d2.steps.transfer.delta.baseFrom).toBe("kept");
    expect([...(await gets(full.snapshotId)), ...(await gets(d1.snapshotId))]).toEqual([]);

    // The kept copy of d2 changed on disk: its hash is not the record's, so the base is read from the store
    // (d2's layer and the chain below it), and the delta is still exact.
    await put(src, `/snapflow/manifests/${d2.snapshotId}.json`, JSON.stringify({ version: 1, entries: [], totals: { files: 0, dirs: 0, symlinks: 0, bytes: 0 } }));
    const d3 = await delta(d2.snapshotId, "3");
    expect(d3.steps.transfer.delta.baseFrom).toBe("store");
    expect((await gets(d2.snapshotId)).length).toBeGreaterThan(0);
    expect(d3.steps.transfer.delta.changed).toBeLessThan(5);
    const expected = await manifest(src);
    const dst = freshSandbox("dst");
    const r = await run("restore", { snapshotId: d3.snapshotId, sandboxId: dst, path: "/workspace/app", strategy: "presigned-tar-zst-pipe" });
    expect(r.steps.transfer.layers).toBe(4);
    expect((await manifest(dst)).entries).toEqual(expected.entries);
  });

  it("a base this sandbox did not keep (a fresh container) but the store holds whole is fetched to where the engine reads it", async () => {
    const src = freshSandbox("src");
    await agent(src, "POST", "/v1/datasets", { path: "/workspace/app", kind: "node-modules", seed: 8, files: 100, bytes: 500_000 });
    const full = await run("backup", { sandboxId: src, path: "/workspace/app", strategy: "tar-zst-pipe" });
    const kept = `/snapflow/manifests/${full.snapshotId}.json`;
    await remove(src, kept);
    expect(await agent(src, "GET", `/v1/stat?path=${encodeURIComponent(kept)}`)).toMatchObject({ exists: false });
    await put(src, "/workspace/app/src/changed.ts", "changed\n");
    const d = await run("backup", { sandboxId: src, path: "/workspace/app", strategy: "tar-zst-delta", baseSnapshotId: full.snapshotId });
    expect(d.status, d.error).toBe("complete");
    expect(d.steps.transfer.delta.baseFrom).toBe("store");
    // Fetched whole into the kept place (the agent's own pass reads a store's copy into memory and keeps none).
    expect(await agent(src, "GET", `/v1/stat?path=${encodeURIComponent(kept)}`)).toMatchObject({ exists: true, type: "file", size: full.steps.transfer.manifest.manifestBytes });
    const expected = await manifest(src);
    const dst = freshSandbox("dst");
    const r = await run("restore", { snapshotId: d.snapshotId, sandboxId: dst, path: "/workspace/app", strategy: "presigned-tar-zst-pipe" });
    expect(r.status, r.error).toBe("complete");
    expect((await manifest(dst)).entries).toEqual(expected.entries);
  });

  it("a chain of layer manifests is followed to the whole one, and a delta past MAX_LAYER_CHAIN stores a whole manifest", async () => {
    const d = depsFrom(env);
    const src = freshSandbox("src");
    await agent(src, "POST", "/v1/datasets", { path: "/workspace/app", kind: "tricky", seed: 6 });
    const full = await run("backup", { sandboxId: src, path: "/workspace/app", strategy: "tar-zst-pipe" });
    const fullRecord = (await getJson<SnapshotRecord>(d.store, snapshotRecordKey(full.snapshotId)))!;
    // Records of layered deltas, each over the one before (their manifests are not read: only the chain is).
    const ids: string[] = [];
    let below = full.snapshotId;
    for (let i = 0; i < MAX_LAYER_CHAIN; i++) {
      const id = `bk-20260101000000-${(0x10000000 + Date.now() % 0x1000000 * 64 + i).toString(16).slice(-8)}`;
      await putJson(d.store, snapshotRecordKey(id), { ...fullRecord, id, manifest: { ...fullRecord.manifest, key: manifestKey(id), layerOf: below }, delta: { kind: "changed-files", base: below, changed: 1, deleted: 0, deletedKey: `snapshots/${id}/deleted.json` } });
      await d.store.put(manifestKey(id), "{}");
      ids.push(id);
      below = id;
    }
    const params = (base: string) => ({ snapshotId: "bk-20260101000000-ffffffff", sandboxId: src, path: "/workspace/app", baseSnapshotId: base, startedAt: new Date().toISOString() });
    // Over a delta 31 layers deep: a layer again, read as the whole manifest and the 31 layers under it.
    const under31 = (await baseManifestSource(d, params(ids[MAX_LAYER_CHAIN - 2]!)))!;
    expect(under31.layerOver).toBe(ids[MAX_LAYER_CHAIN - 2]);
    expect("under" in under31.source && under31.source.under!.length).toBe(MAX_LAYER_CHAIN - 2);
    // Over one 32 deep: a whole manifest, so no reader ever applies more than 32 layers.
    expect((await baseManifestSource(d, params(ids[MAX_LAYER_CHAIN - 1]!)))!.layerOver).toBeUndefined();
    // A link gone: the chain is unusable, naming it.
    await d.store.delete(snapshotRecordKey(ids[3]!));
    await expect(baseManifestSource(d, params(ids[10]!))).rejects.toThrow(new RegExp(`layer over ${ids[3]}, which does not exist`));
  });

  it("a delta restore with a staged (non-pipe) strategy is refused with the reason", async () => {
    const src = freshSandbox("src");
    await agent(src, "POST", "/v1/datasets", { path: "/workspace/app", kind: "tricky", seed: 4 });
    const full = await run("backup", { sandboxId: src, path: "/workspace/app" });
    await put(src, "/workspace/app/plain.txt", "changed");
    const d = await run("backup", { sandboxId: src, path: "/workspace/app", strategy: "tar-zst-delta", baseSnapshotId: full.snapshotId });
    // Refused before anything starts: the API knows which strategies can restore a delta.
    const r = await api("POST", "/api/restores", { snapshotId: d.snapshotId, sandboxId: freshSandbox("dst"), path: "/workspace/app", strategy: "restore-tar-zst" });
    expect(r.status).toBe(400);
    expect(r.json.error.field).toBe("strategy");
    expect(r.json.error.message).toMatch(/cannot restore a changed-files delta; use one of: .*presigned-tar-zst-pipe/);
  });

  it("the API asks for a base exactly when the strategy is a delta", async () => {
    expect((await api("POST", "/api/backups", { sandboxId: "s1", strategy: "tar-zst-delta" })).json.error.field).toBe("baseSnapshotId");
    const missing = await api("POST", "/api/backups", { sandboxId: "s1", strategy: "tar-zst-delta", baseSnapshotId: "bk-20260101000000-00000000" });
    expect(missing.status).toBe(404);
    expect(missing.json.error.field).toBe("baseSnapshotId");
    const full = await api("POST", "/api/backups", { sandboxId: "s1", strategy: "tar-zst-pipe", baseSnapshotId: "bk-20260101000000-00000000" });
    expect(full.status).toBe(400);
    expect(full.json.error.field).toBe("baseSnapshotId");
  });
});
