// Chunks whose stored bytes are not what their name says (issue 21, case 3), through the real Workflows: a chunk
// object overwritten in the store with other bytes of the same size — as a store that does not enforce the
// checksum, a bug or bit rot would leave it — must not be trusted by dedup. The next backup that has the chunk's
// content finds it bad (the store's checksum read back on HEAD, or the Worker's own hash when the store reports
// none) and uploads it again, and a restore in another sandbox completes. A restore that meets a bad chunk names
// it and the snapshots whose indexes reference it. Nothing of ours is mocked: SeaweedFS is the store.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { readIndex } from "../../src/chunks/chunk-index.ts";
import { chunkKey } from "../../src/chunks/chunk-keys.ts";
import { depsFrom } from "../../src/deps.ts";
import type { SnapshotRecord } from "../../src/snapshots/records.ts";
import { agent, api, runWorkflow as run, sha256Hex, sandboxesDeletedAfterAll } from "./helpers.ts";

const d = depsFrom(env);
const APP = "/workspace/app";
const manifest = (sandbox: string) => agent(sandbox, "POST", "/v1/manifest", { path: APP });
const record = async (id: string) => (await api("GET", `/api/snapshots/${id}`)).json as SnapshotRecord;

const sandbox = sandboxesDeletedAfterAll();

/** The same several-chunk tree in a new sandbox each time for one seed (the generator is deterministic). */
async function treeIn(label: string, seed: number): Promise<string> {
  const sb = sandbox(label);
  await agent(sb, "POST", "/v1/datasets", { path: APP, kind: "added-data", seed, files: 400, bytes: 2e6, addedBytes: 6e6 });
  return sb;
}

const indexOf = async (snapshotId: string) => {
  const r = await record(snapshotId);
  return readIndex(d.store, r.archive.key, r.archive.sha256);
};

/** The stored bytes of a chunk, hashed here (not the store's word). */
async function storedDigest(digest: string): Promise<string> {
  const o = await d.store.get(chunkKey("default", digest));
  return sha256Hex(new Uint8Array(await new Response(o!.body).arrayBuffer()));
}

/**
 * Overwrites a chunk's object with other bytes of the same size. `checksum`: the store keeps the SHA-256 of the
 * bytes it now holds (a write under the wrong key by a bug); `none`: the store keeps no checksum (a store that does
 * not enforce one, bit rot under it).
 */
async function spoil(victim: { sha256: string; size: number }, checksum: "of-the-bad-bytes" | "none"): Promise<void> {
  const bad = new Uint8Array(victim.size).fill(0x5a);
  await d.store.put(chunkKey("default", victim.sha256), bad, checksum === "none" ? {} : { sha256: await sha256Hex(bad) });
  expect(await storedDigest(victim.sha256)).not.toBe(victim.sha256);
}

describe("a chunk whose stored bytes are not its name", () => {
  for (const [checksum, seed] of [["of-the-bad-bytes", 2101], ["none", 2102]] as const) {
    it(`is uploaded again by the next backup that has its content, and restores elsewhere complete (store checksum: ${checksum})`, async () => {
      const first = await treeIn("src", seed);
      const a = await run("backup", { sandboxId: first, path: APP, strategy: "squashfs-chunked" });
      const ofA = await indexOf(a.snapshotId);
      // File data in the middle of the image, fetched by the prefetch, not by the mount's first reads.
      const victim = ofA.chunks[Math.floor(ofA.chunks.length / 2)]!;
      await spoil(victim, checksum);

      // The same content backed up in another sandbox: the dedup lookup meets the bad chunk.
      const second = await treeIn("again", seed);
      const b = await run("backup", { sandboxId: second, path: APP, strategy: "squashfs-chunked" });
      expect((await indexOf(b.snapshotId)).chunks.map((c) => c.sha256)).toContain(victim.sha256);
      const t = b.steps.transfer.chunks;
      console.log(`second backup over a spoiled chunk (checksum ${checksum}): uploaded ${t.uploadedChunks}/${t.distinct} chunks, replacedBad ${JSON.stringify(t.replacedBad)}, unverified ${JSON.stringify(t.unverified)}, rehashed ${JSON.stringify(t.rehashed)}; the stored chunk now hashes to ${await storedDigest(victim.sha256)}`);
      expect(t.replacedBad).toBe(1);
      expect(t.badChunks).toEqual([victim.sha256]);
      // SeaweedFS keeps the checksum of every chunk our bound PUTs wrote: only a spoiler's put without one makes the
      // Worker hash the stored bytes itself.
      expect(t.rehashed).toBe(checksum === "none" ? 1 : 0);
      expect(t.unverified).toBe(0);
      expect(t.uploadedChunks).toBeGreaterThanOrEqual(1);
      expect(await storedDigest(victim.sha256)).toBe(victim.sha256);
      expect((await record(b.snapshotId)).chunks!.replacedBad).toBe(1);

      // A restore into a third sandbox completes, and so does one of the first snapshot: the chunk is shared.
      // (Each compared with its own source: the generator leaves symlink mtimes to the clock.)
      for (const [snapshotId, source] of [[b.snapshotId, second], [a.snapshotId, first]] as const) {
        const dst = sandbox("dst");
        await run("restore", { snapshotId, sandboxId: dst, path: APP, strategy: "lazy-squashfs" });
        expect((await manifest(dst)).entries).toEqual((await manifest(source)).entries);
      }
    });
  }

  it("a restore that meets it fails naming the chunk and the snapshots whose indexes reference it", async () => {
    const first = await treeIn("src", 2103);
    const a = await run("backup", { sandboxId: first, path: APP, strategy: "squashfs-chunked" });
    const b = await run("backup", { sandboxId: await treeIn("again", 2103), path: APP, strategy: "squashfs-chunked" });
    const ofA = await indexOf(a.snapshotId);
    const victim = ofA.chunks[Math.floor(ofA.chunks.length / 2)]!;
    expect((await indexOf(b.snapshotId)).chunks.map((c) => c.sha256)).toContain(victim.sha256);
    await spoil(victim, "none");

    const dst = sandbox("dst");
    const failed = await run("restore", { snapshotId: a.snapshotId, sandboxId: dst, path: APP, strategy: "lazy-squashfs" }, "errored");
    console.log(`restore over a spoiled chunk: ${failed.error}`);
    expect(failed.error).toContain(victim.sha256);
    expect(failed.error).toContain(a.snapshotId);
    expect(failed.error).toContain(b.snapshotId);
    expect((await agent(dst, "GET", "/v1/mounts")).mounts).toEqual([]);
  });
});
