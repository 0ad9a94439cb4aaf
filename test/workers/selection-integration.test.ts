// Selection end to end on the tricky tree, against the real agent (real tar, mksquashfs, mkfs.erofs, git) and
// the real S3 server: the same excludes, gitignore and excludeCaches leave out exactly the same paths for every
// format — tar (streamed and staged), squashfs, erofs, a changed-files delta — the restores verify (excluded paths
// are not "missing"), the manifest records the rules and what each excluded, and the probe says what was compiled.
import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { CACHEDIR_SIGNATURE } from "../../container/archive/selection.ts";
import { s3Store } from "../../src/store/s3-store.ts";
import { agent, api, freshSandbox, putFile, runWorkflow } from "./helpers.ts";

const store = s3Store({ endpoint: env.S3_ENDPOINT, bucket: env.S3_BUCKET, region: "auto", accessKeyId: env.S3_ACCESS_KEY_ID, secretAccessKey: env.S3_SECRET_ACCESS_KEY });
const SELECTION = { excludes: ["*.bin", "secret/", "deep/d/d", "names/with space*"], gitignore: true, excludeCaches: true };
const ROOT = "/workspace/app";

/** Independently of the code under test: which source paths the rules above leave out. */
const excludedByHand = (p: string) =>
  p.endsWith(".bin") || p === "secret" || p.startsWith("secret/") || p === "deep/d/d" || p.startsWith("deep/d/d/") || p.startsWith("names/with space") ||
  p === "notes.tmp" || p === "logs" || p.startsWith("logs/") || p === "cache" || p.startsWith("cache/");

const paths = async (sandbox: string, path: string) => (await agent(sandbox, "POST", "/v1/manifest", { path })).entries.map((e: any) => e.path) as string[];

describe("the same selection for every format", () => {
  let src: string;
  let expected: string[];

  beforeAll(async () => {
    src = freshSandbox("sel");
    await agent(src, "POST", "/v1/datasets", { path: ROOT, kind: "tricky", seed: 21 });
    await putFile(src, `${ROOT}/.gitignore`, "*.tmp\nlogs/\n");
    await putFile(src, `${ROOT}/notes.tmp`, "scratch");
    await putFile(src, `${ROOT}/logs/today.txt`, "log");
    await putFile(src, `${ROOT}/cache/CACHEDIR.TAG`, `${CACHEDIR_SIGNATURE}\n# a cache\n`);
    await putFile(src, `${ROOT}/cache/blob`, "cached");
    const all = await paths(src, ROOT);
    expected = all.filter((p) => !excludedByHand(p));
    // The rules do leave things out, and keep the rest.
    expect(all.length - expected.length).toBeGreaterThanOrEqual(10);
    expect(expected).toContain(".gitignore");
    expect(expected).toContain("deep/d");
  });

  it.each([
    ["tar-zst-pipe", "presigned-tar-zst-pipe"],
    ["tar-zst-direct", "restore-tar-zst"],
    // Its agent makes the archive from the same walk as the manifest, so the selection holds for it too.
    ["tar-zst-presigned-multipart", "presigned-tar-zst-pipe"],
    ["squashfs-zstd", "presigned-squashfs-extract"],
    ["erofs-lz4", "presigned-erofs-extract"],
  ])("%s → %s: the restored tree is the selection, verified", async (backup, restore) => {
    const b = await runWorkflow("backup", { sandboxId: src, path: ROOT, strategy: backup, ...SELECTION });
    expect(b.steps.probe.selection).toEqual({ rules: ["exclude *.bin", "exclude secret/", "exclude deep/d/d", "exclude names/with space*", "gitignore", "CACHEDIR.TAG"], warnings: [] });
    const manifest = await new Response((await store.get(`snapshots/${b.snapshotId}/manifest.json`))!.body).json<any>();
    expect(manifest.entries.map((e: any) => e.path)).toEqual(expected);
    expect(manifest.selection).toMatchObject({
      ...SELECTION,
      excluded: { "exclude *.bin": 1, "exclude secret/": 1, "exclude deep/d/d": 1, "exclude names/with space*": 1, gitignore: 2, "CACHEDIR.TAG": 1 },
      warnings: [],
    });
    expect((await api("GET", `/api/snapshots/${b.snapshotId}`)).json.selection).toEqual(SELECTION);
    const dst = freshSandbox("sel-dst");
    const r = await runWorkflow("restore", { snapshotId: b.snapshotId, sandboxId: dst, path: ROOT, strategy: restore });
    expect(r.status).toBe("complete");
    expect(await paths(dst, ROOT)).toEqual(expected);
  });

  it("files-cas → files-extract: no manifest is stored; the one made from the index holds the selection record, byte for byte", async () => {
    const b = await runWorkflow("backup", { sandboxId: src, path: ROOT, strategy: "files-cas", ...SELECTION });
    expect(b.status).toBe("complete");
    expect(await store.get(`snapshots/${b.snapshotId}/manifest.json`)).toBeNull();
    const record = (await api("GET", `/api/snapshots/${b.snapshotId}`)).json;
    expect(record.manifest.fromIndex.selection).toEqual({
      ...SELECTION,
      excluded: { "exclude *.bin": 1, "exclude secret/": 1, "exclude deep/d/d": 1, "exclude names/with space*": 1, gitignore: 2, "CACHEDIR.TAG": 1 },
      warnings: [],
    });
    // deepVerify reads the manifest: the engine makes it from the index and this record, and it must hash to the
    // SHA-256 the backup's own pass wrote (a selection record that came back other than it went would not).
    const dst = freshSandbox("sel-files");
    const r = await runWorkflow("restore", { snapshotId: b.snapshotId, sandboxId: dst, path: ROOT, strategy: "files-extract", deepVerify: true });
    expect(r.status, r.error).toBe("complete");
    expect(await paths(dst, ROOT)).toEqual(expected);
  });

  it("a changed-files delta with the selection, on a base without it: excluded paths go, as deletions", async () => {
    const base = await runWorkflow("backup", { sandboxId: src, path: ROOT, strategy: "tar-zst-pipe" });
    await putFile(src, `${ROOT}/new.txt`, "new");
    const delta = await runWorkflow("backup", { sandboxId: src, path: ROOT, strategy: "tar-zst-delta", baseSnapshotId: base.snapshotId, ...SELECTION });
    const dst = freshSandbox("sel-delta");
    expect((await runWorkflow("restore", { snapshotId: delta.snapshotId, sandboxId: dst, path: ROOT })).status).toBe("complete");
    expect(await paths(dst, ROOT)).toEqual((await paths(src, ROOT)).filter((p) => !excludedByHand(p)));
    expect(await paths(dst, ROOT)).toContain("new.txt");
  });

  it("refuses a negated pattern, and any selection on an overlay delta, naming the field", async () => {
    expect((await api("POST", "/api/backups", { sandboxId: "s1", excludes: ["!keep"] })).json.error).toMatchObject({ code: "bad_request", field: "excludes.0" });
    const r = await api("POST", "/api/backups", { sandboxId: "s1", strategy: "overlay-delta", baseSnapshotId: "bk-20260101000000-00000000", gitignore: true });
    expect(r.json.error).toMatchObject({ code: "bad_request", field: "excludes" });
  });
});
