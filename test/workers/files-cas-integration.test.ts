// The file-level content-addressed format end to end (issue 24): a backup of a tree, a second backup after a small
// change that reads only the changed files and stores only their new chunks (its parent found by itself: this
// sandbox's latest file-level snapshot of the path), restores of both into fresh sandboxes equal to the trees as they
// were, a pack the index names that is not its lineage's refused, and the pack collector keeping what a record names.
// Real agent, real native engine, real S3 server.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import type { BackupParams, TransferResult } from "../../src/backup/backup-params.ts";
import { filesTransfer } from "../../src/backup/transfer/files.ts";
import { depsFrom } from "../../src/deps.ts";
import { agent, api, armAgentFault, freshSandbox, putFile as put, runWorkflow as run, testStore } from "./helpers.ts";

const manifest = (sandbox: string) => agent(sandbox, "POST", "/v1/manifest", { path: "/workspace/app" });
const remove = (sandbox: string, path: string) => agent(sandbox, "DELETE", `/v1/files?path=${encodeURIComponent(path)}`);

async function packsInStore(): Promise<Map<string, number>> {
  const store = await testStore();
  const out = new Map<string, number>();
  for (let cursor: string | undefined; ; ) {
    const page = await store.list("packs/", cursor ? { cursor } : {});
    for (const o of page.objects) out.set(o.key, o.size);
    if (!page.cursor) return out;
    cursor = page.cursor;
  }
}

describe("the file-level format (files-cas)", () => {
  it("an incremental reads and stores only what changed, and both snapshots restore exactly", async () => {
    const src = freshSandbox("src");
    await agent(src, "POST", "/v1/datasets", { path: "/workspace/app", kind: "node-modules", seed: 11, files: 300, bytes: 3_000_000 });
    const first = await run("backup", { sandboxId: src, path: "/workspace/app", strategy: "files-cas" });
    expect(first.status, first.error).toBe("complete");
    const atFirst = await manifest(src);
    const r1 = (await api("GET", `/api/snapshots/${first.snapshotId}`)).json;
    expect(r1.format.kind).toBe("files");
    expect(r1.files.parent).toBeUndefined();
    expect(r1.files.packs).toEqual([{ name: first.snapshotId, bytes: r1.files.pack.bytes }]);
    expect(r1.files.read.files).toBe(atFirst.totals.files);

    // A small change: one file edited, one added, one removed.
    const edited = atFirst.entries.find((e: any) => e.type === "file" && e.path.startsWith("node_modules/") && e.size > 2000).path;
    await put(src, `/workspace/app/${edited}`, "edited\n");
    await put(src, "/workspace/app/src/added/new.ts", "export const added = 1;\n".repeat(50));
    await remove(src, "/workspace/app/package.json");
    const second = await run("backup", { sandboxId: src, path: "/workspace/app", strategy: "files-cas" });
    expect(second.status, second.error).toBe("complete");
    const atSecond = await manifest(src);
    const r2 = (await api("GET", `/api/snapshots/${second.snapshotId}`)).json;
    // Its parent was found by itself, and only the two changed files were read; the rest kept their chunk lists.
    expect(r2.files.parent).toBe(first.snapshotId);
    expect(r2.files.read.files).toBe(2);
    expect(r2.files.reused.files).toBe(atSecond.totals.files - 2);
    expect(r2.files.newChunks).toBe(2);
    expect(r2.files.pack.bytes).toBeLessThan(4000);
    expect(new Set(r2.files.packs.map((x: any) => x.name))).toEqual(new Set([first.snapshotId, second.snapshotId]));
    // Its index is a layer over its parent's (only what changed), both under the tenant's shared prefix: the record
    // lists the chain its index needs.
    expect(r1.archive.key).toBe(`file-indexes/default/${first.snapshotId}`);
    expect(r2.files.chain).toEqual([{ key: r1.archive.key, sha256: r1.archive.sha256 }]);
    expect(r2.manifest.fromIndex.chain).toEqual(r2.files.chain);
    console.log(`index: whole ${r1.archive.bytes} bytes, the layer after a change of 3 files ${r2.archive.bytes} bytes`);
    expect(r2.archive.bytes).toBeLessThan(r1.archive.bytes / 4);

    for (const [snap, expected] of [[second.snapshotId, atSecond], [first.snapshotId, atFirst]] as const) {
      const dst = freshSandbox("dst");
      // The first without deepVerify: its content is checked as it is made (each chunk and file against the index, which
      // the manifest is made from), so verify neither walks nor hashes it again; the second hashes everything against
      // the manifest the engine makes from the index.
      const deepVerify = snap !== second.snapshotId;
      const r = await run("restore", { snapshotId: snap, sandboxId: dst, path: "/workspace/app", strategy: "files-extract", deepVerify });
      expect(r.status, r.error).toBe("complete");
      expect((await manifest(dst)).entries).toEqual(expected.entries);
      if (deepVerify) continue;
      expect(r.steps.verify.verified.by).toBe("in-stream while extracting, then a metadata walk");
      // Not a fork: the tree restored here, changed, backed up again. Its parent is the snapshot it came from, and the
      // restored tree's stat keys spare it reading the files it did not change (the index's are another sandbox's).
      await put(dst, "/workspace/app/src/added/new.ts", "export const added = 2;\n".repeat(50));
      const here = await run("backup", { sandboxId: dst, path: "/workspace/app", strategy: "files-cas" });
      expect(here.status, here.error).toBe("complete");
      const r3 = (await api("GET", `/api/snapshots/${here.snapshotId}`)).json;
      expect(r3.files.parent).toBe(second.snapshotId);
      console.log(`after a restore elsewhere and one change: read ${JSON.stringify(r3.files.read)}, reused ${JSON.stringify(r3.files.reused)}`);
      expect(r3.files.read.files).toBe(1);
      expect(r3.files.newChunks).toBe(1);
      // A layer over the layer: every restored file's stat keys are new here, yet the layer holds only what changed
      // (an entry whose only change is its keys keeps its parent's; the sandbox keeps its own beside the index).
      expect(r3.files.chain).toEqual([...r2.files.chain, { key: r2.archive.key, sha256: r2.archive.sha256 }]);
      expect(r3.archive.bytes).toBeLessThan(r1.archive.bytes / 4);
      const again = await run("restore", { snapshotId: here.snapshotId, sandboxId: freshSandbox("dst"), path: "/workspace/app", strategy: "files-extract", deepVerify: true });
      expect(again.status, again.error).toBe("complete");
    }

    // Lazily: files-mount fetches the layer and the whole index beneath it, composes them and serves the tree.
    const woken = freshSandbox("dst");
    const lazy = await run("restore", { snapshotId: second.snapshotId, sandboxId: woken, path: "/workspace/app", strategy: "files-overlay-restore" });
    expect(lazy.status, lazy.error).toBe("complete");
    expect((await manifest(woken)).entries.map(({ stat: _s, ...e }: any) => e)).toEqual(atSecond.entries.map(({ stat: _s, ...e }: any) => e));
    await agent(woken, "DELETE", "/v1/sandbox").catch(() => {});

    // The collector: both packs are named by a record; deleting the first snapshot keeps its pack (the second's
    // record still names it), and the second restores alone.
    // No manifest is stored: the index holds it, and a reader has the engine make it again, checked against the
    // SHA-256 the record keeps. A record whose manifest SHA-256 is not what the index makes (a damaged record, or an
    // index that is another tree's) is refused by a restore that reads the manifest, naming both.
    const store = await testStore();
    expect(await store.get(r2.manifest.key)).toBeNull();
    expect(r2.manifest.fromIndex).toMatchObject({ key: r2.archive.key, sha256: r2.archive.sha256 });
    const recordKey = `snapshots/${second.snapshotId}/snapshot.json`;
    const record = JSON.parse(await new Response((await store.get(recordKey))!.body).text());
    await store.put(recordKey, JSON.stringify({ ...record, manifest: { ...record.manifest, sha256: "0".repeat(64) } }));
    const victim = freshSandbox("dst");
    const refused = await run("restore", { snapshotId: second.snapshotId, sandboxId: victim, path: "/workspace/app", strategy: "files-extract", deepVerify: true }, "errored");
    expect(refused.error).toMatch(new RegExp(`the manifest made from the index has sha256 ${record.manifest.sha256}, its snapshot's record says ${"0".repeat(64)}`));
    await store.put(recordKey, JSON.stringify(record));

    // A chain whose object is not the one the layer names (a record pointed at another tree's index) is refused.
    const other = freshSandbox("other");
    await agent(other, "POST", "/v1/datasets", { path: "/workspace/app", kind: "node-modules", seed: 15, files: 20, bytes: 100_000 });
    const foreign = await run("backup", { sandboxId: other, path: "/workspace/app", strategy: "files-cas" });
    const rf = (await api("GET", `/api/snapshots/${foreign.snapshotId}`)).json;
    await store.put(recordKey, JSON.stringify({ ...record, files: { ...record.files, chain: [{ key: rf.archive.key, sha256: rf.archive.sha256 }] } }));
    const misled = await run("restore", { snapshotId: second.snapshotId, sandboxId: freshSandbox("dst"), path: "/workspace/app", strategy: "files-extract" }, "errored");
    expect(misled.error).toMatch(/layer 1 names parent [0-9a-f]{64}; the object before it is [0-9a-f]{64}/);
    await store.put(recordKey, JSON.stringify(record));

    // A pack or an index no record names (what a backup that died before its record leaves) goes; deleting the first
    // snapshot keeps its index (the second's is a layer over it) and its pack.
    const stray = "packs/default/bk-20260101000000-0badc0de";
    const strayIndex = "file-indexes/default/bk-20260101000000-0badc0de";
    await store.put(stray, new Uint8Array(100));
    await store.put(strayIndex, new Uint8Array(100));
    expect((await api("DELETE", `/api/snapshots/${first.snapshotId}`)).status).toBe(200);
    const gc = await api("POST", "/api/chunks/gc", { graceSeconds: 0 });
    expect(gc.status).toBe(200);
    expect(gc.json.packs.packs.deleted).toBeGreaterThanOrEqual(1);
    expect(gc.json.packs.indexes.deleted).toBeGreaterThanOrEqual(1);
    const packs = await packsInStore();
    expect(packs.has(stray)).toBe(false);
    expect(await store.head(strayIndex)).toBeNull();
    expect(await store.head(r1.archive.key)).not.toBeNull();
    expect([...packs.keys()].filter((k) => k.endsWith(first.snapshotId) || k.endsWith(second.snapshotId))).toHaveLength(2);
    const dst = freshSandbox("dst");
    const again = await run("restore", { snapshotId: second.snapshotId, sandboxId: dst, path: "/workspace/app", strategy: "files-extract" });
    expect(again.status, again.error).toBe("complete");
    expect((await manifest(dst)).entries).toEqual(atSecond.entries);
  });

  it("a backup with a parent sizes its pack from the parent's totals, and counts the tree when it grew past them", async () => {
    const src = freshSandbox("grow");
    await agent(src, "POST", "/v1/datasets", { path: "/workspace/app", kind: "node-modules", seed: 12, files: 50, bytes: 500_000 });
    const first = await run("backup", { sandboxId: src, path: "/workspace/app", strategy: "files-cas" });
    expect(first.steps.transfer.sizeBy).not.toBe("parent");
    // 12 MB of new, incompressible content against a 0.5 MB parent: more 5 MiB parts than the parent's bound signed URLs for.
    await agent(src, "POST", "/v1/datasets", { path: "/workspace/app/grown", kind: "added-data", seed: 13, files: 6, bytes: 60_000, addedBytes: 12_000_000 });
    const grown = await run("backup", { sandboxId: src, path: "/workspace/app", strategy: "files-cas", tuning: { partSizeMiB: 5 } });
    expect(grown.status, grown.error).toBe("complete");
    expect(grown.steps.transfer.sizeBy).toBe("native");
    expect(grown.steps.transfer.attempts).toBe(2);
    // A small change after it: the parent's bound holds, and no count is made.
    await put(src, "/workspace/app/grown/note.txt", "a line\n");
    const small = await run("backup", { sandboxId: src, path: "/workspace/app", strategy: "files-cas" });
    expect(small.steps.transfer.sizeBy).toBe("parent");
    expect(small.steps.transfer.attempts).toBe(1);
    const dst = freshSandbox("dst");
    const r = await run("restore", { snapshotId: grown.snapshotId, sandboxId: dst, path: "/workspace/app", strategy: "files-extract" });
    expect(r.status, r.error).toBe("complete");
  });

  it("a backup's verify refuses a layer whose chain object left the store (its parent deleted and collected meanwhile)", async () => {
    const d = depsFrom(env);
    const below = "file-indexes/default/bk-20260101000000-0000c0de";
    const p = { snapshotId: "bk-20260101000001-0000c0df", tenant: "default" } as BackupParams;
    const sent = { files: { packs: [], chain: [{ key: below, sha256: "0".repeat(64) }] } } as unknown as TransferResult;
    await expect(filesTransfer.verifyStored!({ d, p, key: "unused", sent })).rejects.toMatchObject({ code: "snapshot_unusable", message: expect.stringContaining(below) });
    await d.store.put(below, new Uint8Array(10));
    await expect(filesTransfer.verifyStored!({ d, p, key: "unused", sent })).resolves.toMatchObject({ chainChecked: 1 });
    await d.store.delete([below]);
  });

  it("a backup's verify looks at its own pack, and at its parent's only once the parent's record is gone", async () => {
    const d = depsFrom(env);
    const parent = `bk-20260101000002-${Math.random().toString(16).slice(2, 10)}`;
    const own = `bk-20260101000003-${Math.random().toString(16).slice(2, 10)}`;
    const p = { snapshotId: own, tenant: "default" } as BackupParams;
    const sent = { files: { parent, packs: [{ name: parent, bytes: 7 }, { name: own, bytes: 5 }] } } as unknown as TransferResult;
    await d.store.put(`packs/default/${own}`, new Uint8Array(5));
    await d.store.put(`snapshots/${parent}/snapshot.json`, "{}");
    // The parent's record stands for its pack (the collector keeps what a record names): one look, not one per pack.
    await expect(filesTransfer.verifyStored!({ d, p, key: "unused", sent })).resolves.toEqual({ packsChecked: 1, packsByParent: 1 });
    // Its record gone (deleted meanwhile): each inherited pack is looked at, and the missing one named.
    await d.store.delete([`snapshots/${parent}/snapshot.json`]);
    await expect(filesTransfer.verifyStored!({ d, p, key: "unused", sent })).rejects.toMatchObject({ code: "snapshot_unusable", message: expect.stringContaining(`${parent} (missing)`) });
    await d.store.put(`packs/default/${parent}`, new Uint8Array(7));
    await expect(filesTransfer.verifyStored!({ d, p, key: "unused", sent })).resolves.toEqual({ packsChecked: 2 });
    // Its own pack is always looked at.
    await d.store.put(`snapshots/${parent}/snapshot.json`, "{}");
    await d.store.delete([`packs/default/${own}`]);
    await expect(filesTransfer.verifyStored!({ d, p, key: "unused", sent })).rejects.toMatchObject({ message: expect.stringContaining(`${own} (missing)`) });
    await d.store.delete([`packs/default/${parent}`, `snapshots/${parent}/snapshot.json`]);
  });

  it("a file-level backup that fails after its pack was stored leaves neither the pack nor a snapshot behind", async () => {
    const src = freshSandbox("fails");
    await agent(src, "POST", "/v1/datasets", { path: "/workspace/app", kind: "node-modules", seed: 14, files: 40, bytes: 300_000 });
    // The pack is completed; then every PUT of the index by the sandbox fails, until the run gives up.
    await armAgentFault(src, { match: "/v1/upload", method: "POST", action: "status", status: 500, times: 20 });
    const failed = await run("backup", { sandboxId: src, path: "/workspace/app", strategy: "files-cas" }, "errored");
    expect((await api("GET", `/api/snapshots/${failed.snapshotId}`)).status).toBe(404);
    expect([...(await packsInStore()).keys()].filter((k) => k.endsWith(failed.snapshotId))).toEqual([]);
  });
});
