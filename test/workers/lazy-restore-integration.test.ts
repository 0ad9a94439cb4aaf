// Chunked snapshots and lazy restores through the real Workflows (issue 10): the agent cuts the staged squashfs
// image into chunks with snapflow-lazy, the Worker uploads only the chunks SeaweedFS lacks, and a lazy restore mounts
// the image over the helper's FUSE file before it is downloaded — real FUSE, real kernel squashfs, real overlayfs.
// Faults are made in the store itself, as a damaged or lost object would be: a chunk's bytes overwritten, a chunk
// deleted. Nothing of ours is mocked.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { depsFrom } from "../../src/deps.ts";
import { readIndex } from "../../src/chunks/chunk-index.ts";
import { chunkKey } from "../../src/chunks/chunk-keys.ts";
import { getJson, restoreRecordKey, snapshotRecordKey, type SnapshotRecord } from "../../src/snapshots/records.ts";
import { introspectWorkflow } from "cloudflare:test";
import { agent, api, armStoreFault, faultRow, firedStoreFaults, kernelMounts, killAgent, putFile, runWorkflow as run, sandboxesDeletedAfterAll } from "./helpers.ts";

const d = depsFrom(env);
const APP = "/workspace/app";
const manifest = (sandbox: string) => agent(sandbox, "POST", "/v1/manifest", { path: APP });
const record = async (id: string) => (await api("GET", `/api/snapshots/${id}`)).json as SnapshotRecord;

const sandbox = sandboxesDeletedAfterAll();

/** A tree whose image has several chunks: a small node_modules-like base and 6 MB of incompressible data. */
async function severalChunks(sb: string, seed: number): Promise<void> {
  await agent(sb, "POST", "/v1/datasets", { path: APP, kind: "added-data", seed, files: 400, bytes: 2e6, addedBytes: 6e6 });
}

/**
 * A chunked snapshot of a several-chunk tree, and a chunk in the middle of its image: file data, fetched by the
 * prefetcher rather than by the mount's first reads (the superblock and the tables at the end).
 */
async function chunkedWithMiddleChunk(seed: number) {
  const src = sandbox("src");
  await severalChunks(src, seed);
  const backup = await run("backup", { sandboxId: src, path: APP, strategy: "squashfs-chunked" });
  const index = await readIndex(d.store, (await record(backup.snapshotId)).archive.key);
  return { src, backup, victim: index.chunks[Math.floor(index.chunks.length / 2)]! };
}

/** After a failed restore: nothing mounted (no FUSE file, no image, no overlay) and the target empty. */
async function nothingLeft(sb: string): Promise<void> {
  expect((await agent(sb, "GET", "/v1/mounts")).mounts).toEqual([]);
  const target = await agent(sb, "GET", `/v1/stat?path=${encodeURIComponent(APP)}`);
  expect(!target.exists || target.entries === 0).toBe(true);
  // The helper stops when its FUSE file is unmounted: no status file says "ready" any more.
}

describe("squashfs-chunked → lazy restores", () => {
  it("round-trips the tricky tree through lazy-squashfs and lazy-squashfs-overlay, with both moments on the record", async () => {
    const src = sandbox("src");
    await agent(src, "POST", "/v1/datasets", { path: APP, kind: "tricky", seed: 31 });
    const source = await manifest(src);
    const backup = await run("backup", { sandboxId: src, path: APP, strategy: "squashfs-chunked" });
    const snap = await record(backup.snapshotId);
    expect(snap.archive.key).toBe(`snapshots/${backup.snapshotId}/archive.sqsh.index.json`);
    expect(snap.chunks).toMatchObject({ avg: 512 * 1024, uploadedChunks: snap.chunks!.distinct });
    // The record keeps the index's SHA-256; the index names every chunk, and every chunk is in the store.
    const index = await readIndex(d.store, snap.archive.key, snap.archive.sha256);
    expect(index.size).toBe(snap.chunks!.imageBytes);
    // The squashfs tables, from the image's superblock: the record lists the chunks that hold them (and the head),
    // and the restore signs those URLs first without reading the index.
    expect(index.tables!.from).toBeGreaterThan(0);
    expect(index.tables!.to).toBeLessThanOrEqual(index.size);
    const holding = index.chunks.filter((c, i) => i < d.config.LAZY_HEAD_CHUNKS || (c.offset + c.size > index.tables!.from && c.offset < index.tables!.to));
    expect(new Set(snap.chunks!.mountFirst)).toEqual(new Set(holding.map((c) => c.sha256)));
    for (const c of index.chunks) expect((await d.store.head(chunkKey("default", c.sha256)))?.size).toBe(c.size);

    for (const strategy of ["lazy-squashfs", "lazy-squashfs-overlay"]) {
      const dst = sandbox("dst");
      const restored = await run("restore", { snapshotId: backup.snapshotId, sandboxId: dst, path: APP, strategy });
      expect((await manifest(dst)).entries, strategy).toEqual(source.entries);
      // Once the index is in, the transfer starts the helper (nothing mounted beside the target), then swaps the tree
      // in, made once at the target over the running helper: usable there before verify's walk; complete last. No
      // materialize step follows.
      const m = restored.steps.transfer;
      expect(restored.steps.materialize).toBeUndefined();
      expect(m.how).toBe(strategy === "lazy-squashfs" ? "lazy" : "lazy-overlay");
      const v = restored.steps.verify;
      expect(m.swappedIn).toBe(true);
      expect(m.servingMs).toBeGreaterThan(0);
      expect(m.usableMs).toBeGreaterThanOrEqual(m.servingMs);
      expect(m.mountAtMs).toBeGreaterThan(0);
      expect(m.remounted).toBe("over what still ran");
      // From the materialization's start (the index in) to usable at the target: within the step's own clock.
      expect(m.usableAfterMaterializeMs).toBeGreaterThan(0);
      expect(m.usableAfterMaterializeMs).toBeLessThanOrEqual(m.endedAt - m.startedAt);
      // Verify came after it: its check at the target (a hash of every file, or none), then every chunk; its swap found the tree in and kept it.
      expect(v.deferred).toContain("swapped in by the transfer");
      expect(v.completeMs).toBeGreaterThan(0);
      const stored = await getJson<any>(d.store, restoreRecordKey(restored.id));
      expect(stored.usableMs).toBe(m.usableMs);
      expect(stored.completeMs).toBeGreaterThanOrEqual(0);
      expect(stored.chunks.chunks.local).toBe(stored.chunks.chunks.total);
      expect(stored.chunks.chunks.onDemand + stored.chunks.chunks.ahead + stored.chunks.chunks.cached).toBe(stored.chunks.chunks.total);
      // The first restore outside the source sandbox hashes every file against the manifest, after usable
      // (src/restore/content-check.ts), reading through the mount (the chunks it read are counted whoever fetched
      // them); from then on the chunks' own SHA-256s vouch for the tree, which is not walked. Nothing claims the
      // image was hashed whole: each chunk was, before it was served.
      if (strategy === "lazy-squashfs") expect(stored.chunks.chunks.read).toBeGreaterThan(0);
      expect(stored.chunks.bytes.read).toBeLessThanOrEqual(stored.chunks.bytes.total);
      expect(JSON.stringify(v)).toContain(strategy === "lazy-squashfs" ? "every file hashed against the manifest (first restore outside" : "each chunk's SHA-256 (against the index the record vouches for) before any byte of it was served; the image's content was checked against the manifest once, so the mount is not walked");
      console.log(`${strategy}: serving ${m.servingMs} ms, usable at the target ${m.usableMs} ms after the request (${m.usableAfterMaterializeMs} ms after its materialization began; helper ready ${m.helperReadyMs} ms, mounted at the target in ${m.mountAtMs} ms), complete ${stored.completeMs} ms; ${JSON.stringify(stored.chunks.chunks)}`);
      const mounts = (await agent(dst, "GET", "/v1/mounts")).mounts;
      expect(mounts.map((x: any) => x.kind).sort()).toEqual(strategy === "lazy-squashfs" ? ["image", "lazy"] : ["image", "lazy", "overlay"]);
      if (strategy === "lazy-squashfs-overlay") {
        // Writable: the write lands in the upper directory on local disk.
        await putFile(dst, `${APP}/written-after-restore.txt`, "hello\n");
        expect((await manifest(dst)).entries.map((e: any) => e.path)).toContain("written-after-restore.txt");
      }
      // Taking the FUSE file down takes everything on it down too, and stops the helper.
      const fuse = mounts.find((x: any) => x.kind === "lazy").path;
      const down = await api("DELETE", `/api/sandboxes/${dst}/mounts?path=${encodeURIComponent(fuse)}`);
      expect(down.json.unmounted.at(-1)).toBe(fuse);
      expect((await agent(dst, "GET", "/v1/mounts")).mounts).toEqual([]);
    }

    // A record from before mount sets: the chunks the mount needs first are found in the index instead.
    const { mountFirst: _listed, ...olderChunks } = snap.chunks!;
    await d.store.put(snapshotRecordKey(backup.snapshotId), JSON.stringify({ ...snap, chunks: olderChunks }), { contentType: "application/json" });
    const older = sandbox("dst");
    const fromIndex = await run("restore", { snapshotId: backup.snapshotId, sandboxId: older, path: APP, strategy: "lazy-squashfs" });
    expect(fromIndex.steps.transfer.urlsBeforeMount).toBeGreaterThan(0);
    expect((await manifest(older)).entries).toEqual(source.entries);
  });

  it("a second backup of a slightly changed tree uploads only the chunks that changed", async () => {
    const src = sandbox("src");
    await severalChunks(src, 32);
    const first = await run("backup", { sandboxId: src, path: APP, strategy: "squashfs-chunked" });
    const one = (await record(first.snapshotId)).chunks!;
    expect(one.uploadedBytes).toBe(one.imageBytes);
    await putFile(src, `${APP}/zz-new/notes.txt`, "a small change after the first backup\n".repeat(100));
    await putFile(src, `${APP}/package.json`, '{"name":"changed"}\n');
    const second = await run("backup", { sandboxId: src, path: APP, strategy: "squashfs-chunked" });
    const two = (await record(second.snapshotId)).chunks!;
    console.log(`dedup: first backup uploaded ${one.uploadedBytes} of ${one.imageBytes} bytes (${one.uploadedChunks}/${one.distinct} chunks); second uploaded ${two.uploadedBytes} of ${two.imageBytes} bytes (${two.uploadedChunks}/${two.distinct} chunks) in a ${second.steps.transfer.ms} ms transfer step`);
    expect(two.distinct).toBeGreaterThan(4);
    expect(two.uploadedChunks).toBeLessThan(two.distinct);
    expect(two.uploadedBytes).toBeLessThan(two.imageBytes / 2);

    // The second snapshot restores whole from chunks both backups uploaded.
    const dst = sandbox("dst");
    await run("restore", { snapshotId: second.snapshotId, sandboxId: dst, path: APP, strategy: "lazy-squashfs" });
    expect((await manifest(dst)).entries).toEqual((await manifest(src)).entries);
  });

  it("a fork — restored writable with lazy-squashfs-overlay, changed, backed up — uploads only the chunks that changed", async () => {
    const src = sandbox("src");
    await severalChunks(src, 36);
    const parent = await run("backup", { sandboxId: src, path: APP, strategy: "squashfs-chunked" });
    const fork = sandbox("fork");
    const opened = await run("restore", { snapshotId: parent.snapshotId, sandboxId: fork, path: APP, strategy: "lazy-squashfs-overlay" });
    // Made at the target over its index: usable at the end of the transfer (no materialize step).
    expect(opened.steps.transfer.usableMs).toBeGreaterThan(0);
    await putFile(fork, `${APP}/zz-fork/changed.txt`, "the fork's own work\n".repeat(500));
    const child = await run("backup", { sandboxId: fork, path: APP, strategy: "squashfs-chunked" });
    const c = (await record(child.snapshotId)).chunks!;
    console.log(`fork: uploaded ${c.uploadedBytes} of ${c.imageBytes} bytes (${c.uploadedChunks}/${c.distinct} chunks), backup wall ${child.wallMs ?? "?"} ms, transfer ${child.steps.transfer.ms} ms`);
    expect(c.uploadedBytes).toBeLessThan(c.imageBytes / 2);
    const dst = sandbox("dst");
    await run("restore", { snapshotId: child.snapshotId, sandboxId: dst, path: APP, strategy: "lazy-squashfs" });
    expect((await manifest(dst)).entries).toEqual((await manifest(fork)).entries);
  });

  it("a chunk whose bytes were damaged in the store fails the restore naming it, and leaves nothing mounted", async () => {
    const src = sandbox("src");
    await severalChunks(src, 33);
    const backup = await run("backup", { sandboxId: src, path: APP, strategy: "squashfs-chunked" });
    const snap = await record(backup.snapshotId);
    const index = await readIndex(d.store, snap.archive.key);
    const victim = index.chunks[Math.floor(index.chunks.length / 2)]!;
    // Same length, other bytes: only the SHA-256 check can tell.
    await d.store.put(chunkKey("default", victim.sha256), new Uint8Array(victim.size).fill(0x5a));
    for (const strategy of ["lazy-squashfs", "lazy-squashfs-overlay"]) {
      const dst = sandbox("dst");
      const failed = await run("restore", { snapshotId: backup.snapshotId, sandboxId: dst, path: APP, strategy }, "errored");
      console.log(`damaged chunk, ${strategy}: ${failed.error}`);
      expect(failed.error).toContain(victim.sha256);
      expect(failed.error).toContain("invalid");
      expect(failed.error).toContain(`referenced by snapshot ${backup.snapshotId}`);
      await nothingLeft(dst);
    }
  });

  it("a chunk missing from the store fails the restore naming it, and leaves nothing mounted", async () => {
    const src = sandbox("src");
    await severalChunks(src, 34);
    const backup = await run("backup", { sandboxId: src, path: APP, strategy: "squashfs-chunked" });
    const snap = await record(backup.snapshotId);
    const index = await readIndex(d.store, snap.archive.key);
    const victim = index.chunks[index.chunks.length - 1]!; // the image's tables: the mount itself needs it
    await d.store.delete(chunkKey("default", victim.sha256));
    const dst = sandbox("dst");
    const failed = await run("restore", { snapshotId: backup.snapshotId, sandboxId: dst, path: APP, strategy: "lazy-squashfs" }, "errored");
    console.log(`missing chunk: ${failed.error}`);
    expect(failed.error).toContain(victim.sha256);
    expect(failed.error).toContain("missing");
    // The mount at the target failed on it: the snapshots that reference it are named too (chunk-references.ts).
    expect(failed.error).toContain(`referenced by snapshot ${backup.snapshotId}`);
    await nothingLeft(dst);
  });

  it("a fork — a chunked parent restored lazily and writable, changed — backs up as an overlay delta of its changes only, restores lazily, and so does a fork of it", async () => {
    const src = sandbox("src");
    await severalChunks(src, 39);
    const parent = await run("backup", { sandboxId: src, path: APP, strategy: "squashfs-chunked" });
    const imageBytes = (await record(parent.snapshotId)).chunks!.imageBytes;

    // Opened writable over the lazily mounted parent.
    const fork = sandbox("fork");
    const opened = await run("restore", { snapshotId: parent.snapshotId, sandboxId: fork, path: APP, strategy: "lazy-overlay-restore" });
    expect(opened.steps.materialize.lazy).toBe(true);
    expect(opened.steps.materialize.usableMs).toBeGreaterThan(0);
    // The lazy base takes the deferred path too: most chunks' URLs came after the fork answered.
    expect(opened.steps.verify.urlsAfterUsable).toBeGreaterThan(0);
    expect((await manifest(fork)).entries).toEqual((await manifest(src)).entries);
    // A new file, an edited one, a deleted one (a whiteout in the upper directory).
    await putFile(fork, `${APP}/zz-fork/work.txt`, "the fork's own work\n".repeat(500));
    await putFile(fork, `${APP}/package.json`, '{"name":"forked"}\n');
    const gone = (await manifest(fork)).entries.find((e: any) => e.type === "file" && e.path.startsWith("node_modules/"))!.path;
    await agent(fork, "DELETE", `/v1/files?path=${encodeURIComponent(`${APP}/${gone}`)}`);
    const forked = await manifest(fork);

    const child = await run("backup", { sandboxId: fork, path: APP, strategy: "overlay-delta", baseSnapshotId: parent.snapshotId });
    const childRecord = await record(child.snapshotId);
    expect(childRecord.delta).toEqual({ kind: "overlay-upper", base: parent.snapshotId, chain: [parent.snapshotId] });
    // Only the changes travel: a small fraction of the image.
    expect(childRecord.archive.bytes).toBeLessThan(imageBytes / 10);
    console.log(`fork as an overlay delta: ${childRecord.archive.bytes} bytes stored (the image: ${imageBytes}), backup wall ${child.wallMs ?? "?"} ms`);

    // Restored elsewhere, by default with the lazy overlay restore: the fork's tree, every chunk verified.
    const dst = sandbox("dst");
    const restored = await run("restore", { snapshotId: child.snapshotId, sandboxId: dst, path: APP });
    expect(restored.strategy).toBe("lazy-overlay-restore");
    expect(restored.steps.transfer.layers).toBe(2);
    expect(restored.steps.verify.completeMs).toBeGreaterThan(0);
    expect((await manifest(dst)).entries).toEqual(forked.entries);

    // A fork of the fork: the restore laid the child's delta read-only under an empty upper, so the grandchild's
    // delta holds only its own change, over the child (overlay-chain.ts).
    await putFile(dst, `${APP}/zz-fork/second.txt`, "the second fork's work\n");
    // (compactAfter: no background compaction of this short chain; overlay-chain-integration tests that)
    const grandchild = await run("backup", { sandboxId: dst, path: APP, strategy: "overlay-delta", baseSnapshotId: child.snapshotId, compactAfter: 32 });
    const grandchildRecord = await record(grandchild.snapshotId);
    expect(grandchildRecord.delta).toEqual({ kind: "overlay-upper", base: child.snapshotId, chain: [parent.snapshotId, child.snapshotId] });
    expect(grandchildRecord.archive.bytes).toBeLessThan(childRecord.archive.bytes);
    const dst2 = sandbox("dst");
    await run("restore", { snapshotId: grandchild.snapshotId, sandboxId: dst2, path: APP });
    expect((await manifest(dst2)).entries).toEqual((await manifest(dst)).entries);

    // The whole-image overlay restore cannot read a chunked base, and says which can.
    const wrong = await api("POST", "/api/restores", { snapshotId: child.snapshotId, sandboxId: sandbox("dst"), path: APP, strategy: "overlay-restore" });
    expect(wrong.status).toBe(400);
    expect(wrong.json.error.message).toContain("lazy-overlay-restore");
  });

  it("a fork's manifest is a layer over its parent's, bound to its hash: a deleted directory restores, and one deleted and made again (opaque), an overlay delta from before layers still restores, a layer changed in the store fails the restore", async () => {
    const src = sandbox("src");
    await severalChunks(src, 41);
    const parent = await run("backup", { sandboxId: src, path: APP, strategy: "squashfs-chunked" });
    const fork = sandbox("fork");
    await run("restore", { snapshotId: parent.snapshotId, sandboxId: fork, path: APP, strategy: "lazy-overlay-restore" });
    const dirs = (await manifest(fork)).entries.filter((e: any) => e.type === "dir" && e.path.split("/").length === 2 && e.path.startsWith("node_modules/")).map((e: any) => e.path);
    const [deleted, remade] = dirs;
    expect(remade).toBeDefined();
    // A directory deleted with all it held: one whiteout in the upper directory.
    await agent(fork, "DELETE", `/v1/files?path=${encodeURIComponent(`${APP}/${deleted}`)}`);
    await putFile(fork, `${APP}/zz-fork/work.txt`, "the fork's own work\n");
    const forked = await manifest(fork);

    const child = await run("backup", { sandboxId: fork, path: APP, strategy: "overlay-delta", baseSnapshotId: parent.snapshotId });
    const childRecord = await record(child.snapshotId);
    expect(childRecord.manifest).toMatchObject({ layerOf: parent.snapshotId, sha256: expect.stringMatching(/^[0-9a-f]{64}$/), ...forked.totals });
    const stored = await getJson<any>(d.store, childRecord.manifest.key);
    expect(stored).toMatchObject({ version: 2, base: parent.snapshotId, removed: [deleted], opaque: [] });
    expect(stored.entries.length).toBeLessThan(10);
    // A changed-files delta cannot build on it: its chain of tar layers would end in an image.
    const refused = await api("POST", "/api/backups", { sandboxId: fork, path: APP, strategy: "tar-zst-delta", baseSnapshotId: child.snapshotId });
    expect(refused.status).toBe(400);
    expect(refused.json.error.field).toBe("baseSnapshotId");

    const dst = sandbox("dst");
    await run("restore", { snapshotId: child.snapshotId, sandboxId: dst, path: APP });
    expect((await manifest(dst)).entries).toEqual(forked.entries);

    // As an overlay delta was stored before layers: the whole tree's manifest, no hash and no layerOf on the record.
    const { sha256: _sha256, layerOf: _layerOf, ...oldManifest } = childRecord.manifest;
    await d.store.put(childRecord.manifest.key, JSON.stringify(forked), { contentType: "application/json" });
    await d.store.put(snapshotRecordKey(child.snapshotId), JSON.stringify({ ...childRecord, manifest: oldManifest }), { contentType: "application/json" });
    const old = sandbox("dst");
    await run("restore", { snapshotId: child.snapshotId, sandboxId: old, path: APP });
    expect((await manifest(old)).entries).toEqual(forked.entries);

    // A layer changed in the store (one entry fewer) is not the one the record's hash names: the restore fails.
    await d.store.put(childRecord.manifest.key, JSON.stringify({ ...stored, entries: stored.entries.slice(1) }), { contentType: "application/json" });
    await d.store.put(snapshotRecordKey(child.snapshotId), JSON.stringify(childRecord), { contentType: "application/json" });
    const tampered = await run("restore", { snapshotId: child.snapshotId, sandboxId: sandbox("dst"), path: APP }, "errored");
    expect(tampered.error).toMatch(`its snapshot's record says ${childRecord.manifest.sha256}`);

    // A directory deleted and made again is opaque over the lower one: the layer says so, and the totals count
    // none of what it hid. tar does not carry the upper's opaque mark; the restore marks it again from the layer
    // manifest, so the parent's old contents stay hidden and the tree is the fork's.
    await agent(fork, "DELETE", `/v1/files?path=${encodeURIComponent(`${APP}/${remade}`)}`);
    await putFile(fork, `${APP}/${remade}/index.js`, "module.exports = 'remade';\n");
    const remadeTree = await manifest(fork);
    expect(forked.entries.filter((e: any) => e.path.startsWith(`${remade}/`)).length).toBeGreaterThan(1); // what it hides
    const secondRun = await run("backup", { sandboxId: fork, path: APP, strategy: "overlay-delta", baseSnapshotId: parent.snapshotId });
    const second = await record(secondRun.snapshotId);
    expect(second.manifest).toMatchObject(remadeTree.totals);
    expect(await getJson<any>(d.store, second.manifest.key)).toMatchObject({ removed: [deleted], opaque: [remade] });
    const back = sandbox("dst");
    const restored = await run("restore", { snapshotId: secondRun.snapshotId, sandboxId: back, path: APP, strategy: "lazy-overlay-restore" });
    expect(restored.steps.transfer.opaque).toBe(1);
    const backTree = (await manifest(back)).entries;
    expect(backTree.filter((e: any) => e.path.startsWith(`${remade}/`)).map((e: any) => e.path)).toEqual([`${remade}/index.js`]);
    expect(backTree).toEqual(remadeTree.entries);
  });

  it("a store that stalls mid-prefetch is abandoned after the silence bound and asked again: the restore completes, every chunk verified", async () => {
    const { src, backup, victim } = await chunkedWithMiddleChunk(37);
    // Longer than the helper's per-attempt bound (the agent's store silence bound: 6 s in tests). Twice: the helper's
    // next attempt meets a stall too, and must give up on it and ask again.
    await armStoreFault({ match: chunkKey("default", victim.sha256), method: "GET", action: "stall", ms: 15_000, times: 2 });
    const dst = sandbox("dst");
    const t = Date.now();
    const restored = await run("restore", { snapshotId: backup.snapshotId, sandboxId: dst, path: APP, strategy: "lazy-squashfs" });
    const ms = Date.now() - t;
    const stalls = (await firedStoreFaults(chunkKey("default", victim.sha256))).length;
    expect(stalls).toBeGreaterThan(0);
    const stored = await getJson<any>(d.store, restoreRecordKey(restored.id));
    expect(stored.chunks.chunks.local).toBe(stored.chunks.chunks.total);
    expect((await manifest(dst)).entries).toEqual((await manifest(src)).entries);
    // Most URLs came after the tree was usable (the tests sign the first chunk and the image's last 1 MiB before the
    // mount): the prefetch and the walk waited for them, none failed for the want of one.
    const m = restored.steps.transfer;
    expect(m.urlsBeforeMount).toBeLessThan(m.chunks);
    expect(restored.steps.verify.urlsAfterUsable).toBe(m.chunks - m.urlsBeforeMount);
    // Left: the restore's own mounts (FUSE file and image), nothing else.
    expect((await agent(dst, "GET", "/v1/mounts")).mounts.map((x: any) => x.kind).sort()).toEqual(["image", "lazy"]);
    faultRow({ fault: "one chunk's GET stalled 15 s mid-prefetch (agent ⇄ store)", phase: "restore verify (lazy-squashfs, prefetch)", outcome: "stalled GETs abandoned (6 s of silence, or with the mount the swap replaces), chunk fetched again; complete, verified", retries: `${stalls} stalled GET(s), then one that answered`, ms, leftovers: [] });
  });

  it("the agent killed mid-prefetch (its helper with it): the restore completes or fails naming the cause, and no mount is left behind", async () => {
    const { src, backup, victim } = await chunkedWithMiddleChunk(38);
    // Hold the prefetch open long enough to kill the agent while it runs.
    await armStoreFault({ match: chunkKey("default", victim.sha256), method: "GET", action: "stall", ms: 5_000, times: 1 });
    const dst = sandbox("dst");
    // Real retry delays: the step's next attempt must meet the restarted agent, as it would in production.
    await using wf = await introspectWorkflow(env.RESTORE_WORKFLOW);
    const t = Date.now();
    const started = await api("POST", "/api/restores", { snapshotId: backup.snapshotId, sandboxId: dst, path: APP, strategy: "lazy-squashfs" });
    expect(started.status).toBe(202);
    // Mounted: the FUSE file and the image are up, the stalled chunk not yet local.
    for (let i = 0; (await kernelMounts(dst)).length < 2; i++) {
      if (i > 300) throw new Error("the lazy mount never came up");
      await new Promise((r) => setTimeout(r, 50));
    }
    await killAgent();
    const [instance] = await wf.get();
    // waitForStatus("complete") rejects once the instance has errored: either way it has ended.
    const ended = await instance!.waitForStatus("complete").then(() => "complete", () => "errored");
    const status = (await api("GET", `/api/restores/${started.json.id}`)).json;
    const ms = Date.now() - t;
    console.log(`agent killed mid-prefetch: ${ended}${status.error ? ` (${status.error})` : ""}; kernel mounts after: ${JSON.stringify(await kernelMounts(dst))}`);
    if (ended === "complete") {
      expect((await manifest(dst)).entries).toEqual((await manifest(src)).entries);
      // Only the live restore's two mounts, at the target and its FUSE file; none of the dead helper's.
      expect((await kernelMounts(dst)).length).toBe(2);
    } else {
      expect(status.error).toMatch(/agent|helper|restart|connection/i);
      expect(await kernelMounts(dst)).toEqual([]);
      await nothingLeft(dst);
    }
    faultRow({ fault: "agent SIGKILLed (with its FUSE helper) mid-prefetch, restarted", phase: "restore verify (lazy-squashfs)", outcome: ended === "complete" ? "complete, verified; the dead helper's mounts gone" : `failed, naming it; nothing mounted`, retries: "1 (verify step)", ms, leftovers: [] });
  });

  it("lazy restores read only chunked snapshots, and chunked snapshots only lazily", async () => {
    const src = sandbox("src");
    await agent(src, "POST", "/v1/datasets", { path: APP, kind: "tricky", seed: 35 });
    const whole = await run("backup", { sandboxId: src, path: APP, strategy: "squashfs-zstd-3" });
    const refused = await api("POST", "/api/restores", { snapshotId: whole.snapshotId, sandboxId: sandbox("dst"), path: APP, strategy: "lazy-squashfs" });
    expect(refused.status).toBe(400);
    expect(refused.json.error.field).toBe("strategy");
    const chunked = await run("backup", { sandboxId: src, path: APP, strategy: "squashfs-chunked" });
    const wrong = await api("POST", "/api/restores", { snapshotId: chunked.snapshotId, sandboxId: sandbox("dst"), path: APP, strategy: "presigned-squashfs-mount" });
    expect(wrong.status).toBe(400);
    expect(wrong.json.error.message).toContain("lazy-squashfs");
  });
});
