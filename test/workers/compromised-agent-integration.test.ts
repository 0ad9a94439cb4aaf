// A compromised sandbox, second round (issue 21), through the Workflows: the source sandbox's agent does the real
// work and then answers whatever it likes. The lies are told by the fault proxy in front of the agent
// (test/fault-proxy.ts `lie`: the real answer with fields replaced), which is exactly what a taken-over agent can
// do: it holds only the Worker's requests and its own files. Each test is named after its attack and checks that
// the Worker neither signed nor stored anything on the lie's word, and recorded nothing good.
import { env } from "cloudflare:workers";
import { afterAll, describe, expect, it } from "vitest";
import { archivePhase } from "../../src/backup/backup-phases.ts";
import { chunkKey } from "../../src/chunks/chunk-keys.ts";
import { depsFrom } from "../../src/deps.ts";
import { getJson, manifestKey, putJson, snapshotRecordKey, type SnapshotRecord } from "../../src/snapshots/records.ts";
import { findBackup } from "../../src/strategies/registry.ts";
import { agent, agentRequests, api, armAgentFault, freshSandbox, putFile, runWorkflow, sha256Hex } from "./helpers.ts";

const used: string[] = [];
afterAll(async () => {
  // Mounts (an overlay-restore's image and overlay) go with their sandbox.
  for (const sandbox of used) await agent(sandbox, "DELETE", "/v1/sandbox").catch(() => {});
});

const noSnapshots = async (sandboxId: string) => expect((await api("GET", `/api/snapshots?sandboxId=${sandboxId}`)).json.snapshots).toEqual([]);

describe("store keys are built from validated parts, never from the sandbox's words", () => {
  it("chunk-digest-dot-segments: an index naming a chunk `zz/../<digest>` ends the backup before any URL is signed", async () => {
    const src = freshSandbox("liar-index");
    await putFile(src, "/workspace/app/a.txt", "honest\n");
    const other = "a".repeat(64);
    await armAgentFault(src, { match: "/v1/chunks/index", action: "lie", set: { "index.chunks.0.sha256": `zz/../${other}` }, times: 5 });
    const ended = await runWorkflow("backup", { sandboxId: src, path: "/workspace/app", strategy: "squashfs-chunked" }, "errored");
    expect(ended.error).toMatch(/index chunks: the agent in sandbox .* answered a malformed result: index\.chunks\.0\.sha256: a chunk digest is 64 lowercase hex/);
    // Asked once (a malformed answer is not retried), and no chunk URL was signed or used.
    expect(await agentRequests(src, "/v1/chunks/")).toEqual(["POST /v1/chunks/index"]);
    await noSnapshots(src);
  });

  it("chunk-digest-empty-checksum: no key or PUT URL is made from a digest that is not 64 lowercase hex", async () => {
    const presigner = depsFrom(env).presigner;
    for (const digest of ["x", "", `zz/../${"a".repeat(64)}`, "A".repeat(64)]) {
      expect(() => chunkKey("default", digest), digest).toThrow(/64 lowercase hex/);
      await expect(presigner.url(`chunks/${digest}`, "PUT", { sha256: digest }), digest).rejects.toMatchObject({ code: "unbound_write" });
    }
    // Nor from a tenant that could reach into another's prefix (slash, dot segments) or is not one at all.
    for (const tenant of ["", "a/b", "..", "A", "x".repeat(64)]) expect(() => chunkKey(tenant, "a".repeat(64)), tenant).toThrow(/a chunk key needs a tenant/);
    await expect(presigner.url("chunks/x", "PUT")).rejects.toMatchObject({ code: "unbound_write", message: expect.stringMatching(/without the SHA-256/) });
    // A part URL is bound at completion (the upload was opened with SHA-256 part checksums), so it is signed.
    expect(await presigner.url("k", "PUT", { query: { partNumber: "1", uploadId: "u" } })).toMatch(/partNumber=1/);
  });
});

describe("a file-level index reaches no pack outside its lineage", () => {
  it("files-foreign-pack: an answer naming another sandbox's pack ends the backup, and nothing is recorded", async () => {
    const victim = freshSandbox("files-victim");
    const liar = freshSandbox("files-liar");
    await putFile(victim, "/workspace/app/secret.txt", "the victim's\n");
    const theirs = await runWorkflow("backup", { sandboxId: victim, path: "/workspace/app", strategy: "files-cas" });
    await putFile(liar, "/workspace/app/a.txt", "mine\n");
    // The liar's engine did its work; its answer then claims the victim's pack as one its index names.
    await armAgentFault(liar, { match: "/v1/files/pack", action: "lie", set: { "packs.0.name": theirs.snapshotId }, times: 5 });
    const ended = await runWorkflow("backup", { sandboxId: liar, path: "/workspace/app", strategy: "files-cas" }, "errored");
    expect(ended.error).toMatch(new RegExp(`the index names pack ${theirs.snapshotId}, which is neither this backup's nor one its parent`));
    await noSnapshots(liar);
  });
});

describe("a file-level index's chain is the record's, never the sandbox's", () => {
  it("files-layer-depth-lie: an answer claiming a layer where no parent was given ends the backup, and nothing is recorded", async () => {
    const liar = freshSandbox("files-depth-liar");
    await putFile(liar, "/workspace/app/a.txt", "mine\n");
    // The first backup here has no parent: a layer would lie over an index the record cannot name.
    await armAgentFault(liar, { match: "/v1/files/pack", action: "lie", set: { depth: 1 }, times: 5 });
    const ended = await runWorkflow("backup", { sandboxId: liar, path: "/workspace/app", strategy: "files-cas" }, "errored");
    expect(ended.error).toMatch(/the engine reports an index at depth 1; over no base it can only be at depth 0/);
    await noSnapshots(liar);
  });
});

describe("a file-level index is checked against what it serves before it is trusted", () => {
  it("files-index-content-lie: a source's index giving a file a SHA-256 not its content's fails its first wake elsewhere, which leaves nothing", async () => {
    const src = freshSandbox("files-content-liar");
    const dst = freshSandbox("files-content-wake");
    used.push(src, dst);
    await putFile(src, "/workspace/app/a.txt", "what the file holds\n");
    await putFile(src, "/workspace/app/b.txt", "another\n");
    // The source's engine writes its index and manifest with a.txt's hash replaced (the agent's own test-only fault,
    // native/lazy/internal/filecas Options.Lie): every chunk is honest, so only hashing the file as served can tell.
    await agent(src, "POST", "/v1/faults", { route: "POST /v1/files/pack", times: 1, action: "lie" });
    const b = await runWorkflow("backup", { sandboxId: src, path: "/workspace/app", strategy: "files-cas", contentCheck: "off" });
    const woken = await runWorkflow("restore", { snapshotId: b.snapshotId, sandboxId: dst, path: "/workspace/app", strategy: "files-overlay-restore" }, "errored");
    expect(woken.error).toMatch(new RegExp(`restored tree differs from snapshot ${b.snapshotId}: 0 missing, 1 changed; first: changed a\\.txt \\(sha256\\)`));
    // Rolled back: nothing at the target, no mount left in the sandbox, and the snapshot is not recorded as checked.
    expect((await agent(dst, "GET", "/v1/stat?path=/workspace/app")).exists).toBe(false);
    expect((await api("GET", `/api/sandboxes/${dst}/mounts`)).json.mounts).toEqual([]);
    expect((await getJson<SnapshotRecord>(depsFrom(env).store, snapshotRecordKey(b.snapshotId)))!.contentChecked).toBeUndefined();
  });
});

describe("a layer manifest's URL is bound and create-only", () => {
  it("overlay-manifest-empty-hash: a layer manifest reported with an empty SHA-256 ends the backup; nothing is signed or recorded", async () => {
    const src = freshSandbox("liar-layer-src");
    const work = freshSandbox("liar-layer");
    used.push(src, work);
    await putFile(src, "/workspace/app/a.txt", "base\n");
    const base = await runWorkflow("backup", { sandboxId: src, path: "/workspace/app", strategy: "squashfs-zstd-3" });
    await runWorkflow("restore", { snapshotId: base.snapshotId, sandboxId: work, path: "/workspace/app", strategy: "overlay-restore" });
    await putFile(work, "/workspace/app/b.txt", "changed\n");
    await armAgentFault(work, { match: "/v1/overlay-layer", action: "lie", set: { "manifest.sha256": "" }, times: 5 });
    const ended = await runWorkflow("backup", { sandboxId: work, path: "/workspace/app", strategy: "overlay-delta", baseSnapshotId: base.snapshotId }, "errored");
    expect(ended.error).toMatch(/overlay layer: the agent in sandbox .* answered a malformed result: manifest\.sha256: a SHA-256 in lowercase hex/);
    expect(await agentRequests(work, "/v1/upload")).toEqual([]);
    await noSnapshots(work);
  });
});

describe("a manifest's size is bounded at backup", () => {
  // The deployment's bounds lowered for this one call of the archive phase (real agent, real store): the same code a
  // 2.5 M-entry tree meets at the defaults (MAX_MANIFEST_ENTRIES 1,000,000, MAX_MANIFEST_BYTES 128 MiB).
  it("nothing-bounds-a-manifest: a manifest over MAX_MANIFEST_ENTRIES or MAX_MANIFEST_BYTES is refused before it is stored", async () => {
    const src = freshSandbox("big-manifest");
    for (let i = 0; i < 8; i++) await putFile(src, `/workspace/app/f${i}.txt`, `file ${i}\n`);
    const d = depsFrom(env);
    for (const [strategy, limits, why] of [
      ["tar-zst-direct", { MAX_MANIFEST_ENTRIES: 5 }, /has 8 entries \(MAX_MANIFEST_ENTRIES is 5\)/],
      ["tar-zst-direct", { MAX_MANIFEST_BYTES: 300 }, /has \d+ bytes \(MAX_MANIFEST_BYTES is 300\)/],
      ["squashfs-zstd-3", { MAX_MANIFEST_ENTRIES: 5 }, /has 8 entries/],
    ] as const) {
      const p = { snapshotId: `bk-bounds-${strategy}-${Object.keys(limits)[0]!.toLowerCase()}`, sandboxId: src, path: "/workspace/app", strategy };
      const refused = await archivePhase({ ...d, config: { ...d.config, ...limits } }, p, findBackup(strategy)!).catch((e) => e);
      expect(refused, strategy).toMatchObject({ code: "manifest_too_large", message: expect.stringMatching(why) });
      expect(refused.message).toMatch(/--exclude/);
      expect(await d.store.head(manifestKey(p.snapshotId))).toBeNull();
    }
    await noSnapshots(src);
  });
});

describe("an image's manifest is not taken on the source sandbox's word elsewhere", () => {
  /** What a compromised source achieves at backup: an honest image, a manifest that says other hashes, a record agreeing. */
  async function lyingManifest(snapshotId: string, path: string): Promise<void> {
    const store = depsFrom(env).store;
    const record = (await getJson<SnapshotRecord>(store, snapshotRecordKey(snapshotId)))!;
    const text = await new Response((await store.get(record.manifest.key))!.body).text();
    const m = JSON.parse(text);
    const entry = m.entries.find((e: { path: string }) => e.path === path);
    entry.sha256 = "0".repeat(64);
    const lie = JSON.stringify(m);
    await store.put(record.manifest.key, lie);
    const sha256 = await sha256Hex(new TextEncoder().encode(lie));
    await putJson(store, snapshotRecordKey(snapshotId), { ...record, manifest: { ...record.manifest, ...(record.manifest.sha256 ? { sha256 } : {}) } });
  }

  for (const strategy of ["presigned-squashfs-mount", "presigned-squashfs-extract"]) {
    it(`image-manifest-lie (${strategy}): restored into another sandbox, the first restore hashes every file and refuses the lie`, async () => {
      const src = freshSandbox("image-liar");
      const dst = freshSandbox("image-victim");
      used.push(src, dst);
      await putFile(src, "/workspace/app/a.txt", "what the image holds\n");
      await putFile(src, "/workspace/app/b.txt", "b\n");
      const b = await runWorkflow("backup", { sandboxId: src, path: "/workspace/app", strategy: "squashfs-zstd-3" });
      await lyingManifest(b.snapshotId, "a.txt");
      const ended = await runWorkflow("restore", { snapshotId: b.snapshotId, sandboxId: dst, path: "/workspace/app", strategy }, "errored");
      expect(ended.error).toMatch(/restored tree differs from snapshot .*a\.txt \(sha256\)/);
      // A mount due its content check was checked beside the target, never laid at it first.
      if (strategy === "presigned-squashfs-mount") expect(ended.steps.materialize).toMatchObject({ how: "mount-kernel", mounted: expect.stringMatching(/snapflow-new-/) });
      if (strategy === "presigned-squashfs-mount") expect(ended.steps.materialize.swappedIn).toBeUndefined();
      // Nothing recorded as checked; the target is left as it was (absent).
      expect((await getJson<SnapshotRecord>(depsFrom(env).store, snapshotRecordKey(b.snapshotId)))!.contentChecked).toBeUndefined();
      expect((await agent(dst, "GET", "/v1/stat?path=/workspace/app")).exists).toBe(false);
    });
  }

  it("an honest image: the first restore elsewhere hashes every file and records it; the next trusts the image's SHA-256; deepVerify through the API always hashes", async () => {
    const src = freshSandbox("image-honest");
    const dst = freshSandbox("image-dst");
    const dst2 = freshSandbox("image-dst2");
    used.push(src, dst, dst2);
    await putFile(src, "/workspace/app/a.txt", "honest\n");
    const b = await runWorkflow("backup", { sandboxId: src, path: "/workspace/app", strategy: "squashfs-zstd-3" });
    const first = await runWorkflow("restore", { snapshotId: b.snapshotId, sandboxId: dst, path: "/workspace/app", strategy: "presigned-squashfs-extract" });
    expect(first.steps.verify.verified.by).toMatch(/every file hashed against the manifest \(first restore outside image-honest/);
    const record = (await api("GET", `/api/snapshots/${b.snapshotId}`)).json;
    expect(record.contentChecked).toMatchObject({ sandboxId: dst });
    const second = await runWorkflow("restore", { snapshotId: b.snapshotId, sandboxId: dst2, path: "/workspace/app", strategy: "presigned-squashfs-extract" });
    expect(second.steps.verify.verified.by).toBe("the image's SHA-256 on arrival, then a metadata walk");
    const deep = await runWorkflow("restore", { snapshotId: b.snapshotId, sandboxId: dst2, path: "/workspace/app", strategy: "presigned-squashfs-extract", replace: true, deepVerify: true });
    expect(deep.steps.verify.verified.by).toBe("every file hashed against the manifest (deepVerify)");
    // Mounted where the content was checked once: the image's SHA-256 vouches for it, and the mount is not walked.
    const dst3 = freshSandbox("image-dst3");
    used.push(dst3);
    const mounted = await runWorkflow("restore", { snapshotId: b.snapshotId, sandboxId: dst3, path: "/workspace/app", strategy: "presigned-squashfs-mount" });
    expect(mounted.steps.verify.verified).toMatchObject({ metadata: "image", by: expect.stringMatching(/the mount is not walked/) });
    // A trusted image is mounted once, straight at the target, by the swap at the end of its transfer: nothing beside
    // it, no remount, no materialize step.
    expect(mounted.steps.transfer).toMatchObject({ swappedIn: true, remounted: "over what still ran", mountAtMs: expect.any(Number) });
    expect(mounted.steps.materialize).toBeUndefined();
    expect(mounted.steps.verify.remounted).toBe("over what still ran");
    expect((await agent(dst3, "GET", "/v1/mounts")).mounts).toEqual([expect.objectContaining({ path: "/workspace/app", kind: "image", how: "mount-kernel" })]);
    expect((await agent(dst3, "POST", "/v1/manifest", { path: "/workspace/app" })).entries.map((e: { path: string }) => e.path)).toEqual(["a.txt"]);
    await api("DELETE", `/api/sandboxes/${dst3}/mounts?path=/workspace/app`);
    // Into its own sandbox, a snapshot can only lie to itself: no hashing.
    const home = await runWorkflow("restore", { snapshotId: b.snapshotId, sandboxId: src, path: "/workspace/back", strategy: "presigned-squashfs-extract" });
    expect(home.steps.verify.verified.by).toBe("the image's SHA-256 on arrival, then a metadata walk");
  });
});
