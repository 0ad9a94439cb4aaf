// Backup and restore Workflows end to end in workerd, against the real host agent (real tar, zstd) and the real
// S3 server. Nothing of ours is mocked; the test pool's Workflow introspection only removes retry delays.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { agent, api, freshSandbox, runWorkflow } from "./helpers.ts";

const runBackup = (body: Record<string, unknown>, expected: "complete" | "errored" = "complete") => runWorkflow("backup", body, expected);
const runRestore = (body: Record<string, unknown>, expected: "complete" | "errored" = "complete") => runWorkflow("restore", body, expected);

const manifest = (sandbox: string, path: string) => agent(sandbox, "POST", "/v1/manifest", { path });

describe("backup → restore round trip of a tricky tree", () => {
  for (const [backup, restore] of [["tar-zst-pipe", "restore-tar-zst-pipe"], ["tar-zst-direct", "restore-tar-zst"]] as const) {
    it(`${backup} then ${restore}: symlinks, hard links, empty dirs and files, sparse, modes, unicode and long names`, async () => {
      const src = freshSandbox("src");
      const dst = freshSandbox("dst");
      await agent(src, "POST", "/v1/datasets", { path: "/workspace/app", kind: "tricky", seed: 7 });

      const b = await runBackup({ sandboxId: src, path: "/workspace/app", strategy: backup });
      expect(b.status).toBe("complete");
      expect(Object.keys(b.steps)).toEqual(["probe", "archive", "transfer", "verify", "record"]);
      for (const s of Object.values<any>(b.steps)) expect(s.ms).toBeGreaterThanOrEqual(0);
      expect(b.steps.transfer.bytes).toBeGreaterThan(0);
      // Through the Worker (pipe), the Worker hashed the bytes on their way: verify checks the stored size only.
      // Staged in the sandbox (direct), the sandbox moved them: verify reads the object back.
      expect(b.steps.verify.checked).toMatch(backup === "tar-zst-pipe" ? /^hashed by the Worker in the stream/ : /^read back and hashed by the Worker/);
      expect(b.steps.verify.bytes).toBe(b.steps.transfer.bytes);

      const r = await runRestore({ snapshotId: b.snapshotId, sandboxId: dst, path: "/workspace/restored", strategy: restore });
      expect(r.status, r.error).toBe("complete");
      expect(Object.keys(r.steps)).toEqual(["probe", "transfer", "materialize", "verify", "record"]);

      // Independently of the Workflow's own verify step: the two trees' manifests are equal.
      const [a, c] = await Promise.all([manifest(src, "/workspace/app"), manifest(dst, "/workspace/restored")]);
      expect(c.entries).toEqual(a.entries);
      const paths = a.entries.map((e: any) => e.path);
      expect(paths).toContain("unicode/café-naïve-日本語-😀.txt");
      // Hard links: the later name in walk order points at the first.
      expect(a.entries.find((e: any) => e.path === "plain.txt")).toMatchObject({ link: "hard-link-to-plain" });
      expect(a.entries.find((e: any) => e.path === "dangling-link")).toMatchObject({ type: "symlink", target: "does/not/exist" });
      expect(a.entries.find((e: any) => e.path === "empty-dir/nested-empty")).toMatchObject({ type: "dir" });
      expect(a.entries.find((e: any) => e.path === "secret/only-me")).toMatchObject({ mode: 0o600 });

      const listed = (await api("GET", "/api/snapshots")).json.snapshots.map((s: any) => s.id);
      expect(listed).toContain(b.snapshotId);
    });
  }

  it("a restore that does not match is a failed restore, and leaves the target empty", async () => {
    const src = freshSandbox("src");
    const dst = freshSandbox("dst");
    await agent(src, "POST", "/v1/datasets", { path: "/workspace/app", kind: "tricky", seed: 8 });
    const b = await runBackup({ sandboxId: src, path: "/workspace/app" });
    // Break the stored manifest's promise: claim a file the archive does not hold.
    const key = `snapshots/${b.snapshotId}/manifest.json`;
    const m = await manifest(src, "/workspace/app");
    m.entries.push({ path: "zzz-not-in-archive", type: "file", mode: 0o644, size: 1, mtime: 0, sha256: "00" });
    const { s3Store } = await import("../../src/store/s3-store.ts");
    const store = s3Store({ endpoint: env.S3_ENDPOINT, bucket: env.S3_BUCKET, region: "auto", accessKeyId: env.S3_ACCESS_KEY_ID, secretAccessKey: env.S3_SECRET_ACCESS_KEY });
    await store.put(key, JSON.stringify(m));
    // The record keeps the stored manifest's SHA-256, which the restore checks first: taken out (as in a record from
    // before manifests were hashed), the in-stream comparison is what refuses the archive.
    const recordKey = `snapshots/${b.snapshotId}/snapshot.json`;
    const record = JSON.parse(await new Response((await store.get(recordKey))!.body).text());
    expect(record.manifest.sha256).toMatch(/^[0-9a-f]{64}$/);
    delete record.manifest.sha256;
    await store.put(recordKey, JSON.stringify(record));

    const r = await runRestore({ snapshotId: b.snapshotId, sandboxId: dst, path: "/workspace/restored" }, "errored");
    expect(r.error).toMatch(/does not match its manifest.*1 missing.*zzz-not-in-archive/);
    expect(await agent(dst, "GET", "/v1/stat?path=/workspace/restored")).toEqual({ exists: false });
  });
});

describe("retries and failures", () => {
  it("a step that fails transiently is retried and the Workflow completes", async () => {
    const src = freshSandbox("src");
    await agent(src, "POST", "/v1/datasets", { path: "/workspace/app", kind: "tricky", seed: 9 });
    // The agent answers the next two archive requests with a 503: the transfer step (which streams the
    // archive) fails twice for real and its retry policy (limit 3) carries it through.
    await agent(src, "POST", "/v1/faults", { route: "GET /v1/archive", times: 2 });
    const b = await runBackup({ sandboxId: src, path: "/workspace/app", strategy: "tar-zst-pipe" });
    expect(b.status).toBe("complete");
    expect(b.steps.transfer.bytes).toBeGreaterThan(0);
  });

  it("a step that keeps failing fails the backup and leaves no snapshot, listed or stored", async () => {
    const src = freshSandbox("src");
    await agent(src, "POST", "/v1/datasets", { path: "/workspace/app", kind: "tricky", seed: 10 });
    await agent(src, "POST", "/v1/faults", { route: "GET /v1/archive", times: 50 });
    const b = await runBackup({ sandboxId: src, path: "/workspace/app", strategy: "tar-zst-pipe" }, "errored");
    expect(b.status).toBe("errored");
    expect(b.error).toMatch(/injected fault/);
    expect((await api("GET", "/api/snapshots")).json.snapshots.map((s: any) => s.id)).not.toContain(b.snapshotId);
    expect((await api("GET", `/api/snapshots/${b.snapshotId}`)).status).toBe(404);
    const { s3Store } = await import("../../src/store/s3-store.ts");
    const store = s3Store({ endpoint: env.S3_ENDPOINT, bucket: env.S3_BUCKET, region: "auto", accessKeyId: env.S3_ACCESS_KEY_ID, secretAccessKey: env.S3_SECRET_ACCESS_KEY });
    expect((await store.list(`snapshots/${b.snapshotId}/`)).objects).toEqual([]);
  });

  it("a missing source directory is refused at the request, naming the path (api-validation has the cases)", async () => {
    const src = freshSandbox("src");
    await agent(src, "POST", "/v1/datasets", { path: "/workspace/app", kind: "tricky", seed: 11 });
    const r = await api("POST", "/api/backups", { sandboxId: src, path: "/workspace/nothing-here" });
    expect(r.status).toBe(404);
    expect(r.json.error).toMatchObject({ code: "not_found", field: "path", message: `path: /workspace/nothing-here in sandbox ${src} is not a directory to back up: nothing is there` });
  });
});

describe("tuning and cold caches", () => {
  it("a backup takes the part size and concurrency it is given, and drops caches when asked", async () => {
    const src = freshSandbox("src");
    await agent(src, "POST", "/v1/datasets", { path: "/workspace/app", kind: "node-modules", seed: 5, files: 300, bytes: 12_000_000 });
    const b = await runBackup({ sandboxId: src, path: "/workspace/app", strategy: "tar-pipe", dropCaches: true, tuning: { partSizeMiB: 5, concurrency: 3 } });
    expect(b.status).toBe("complete");
    // Plain tar of ~12 MB in 5 MiB parts: three parts, the last one short.
    expect(b.steps.transfer.parts).toBe(3);
    // Relayed in 256 KiB blocks, not in the ~4 KB chunks a fetch body arrives in (~3,000 reads for this archive):
    // the deadline's timer, the digest and the cutter run per block (store/block-reader.ts).
    expect(b.steps.transfer.reads).toBeGreaterThan(0);
    expect(b.steps.transfer.reads).toBeLessThanOrEqual(Math.ceil(b.steps.transfer.bytes / (64 * 1024)));
    expect(b.steps.probe.cachesDropped).toBe(true);
    const r = await runRestore({ snapshotId: b.snapshotId, sandboxId: freshSandbox("dst"), path: "/workspace/app", dropCaches: true });
    expect(r.steps.probe.cachesDropped).toBe(true);
  });

  it("a part size below R2's minimum is refused naming the field", async () => {
    const r = await api("POST", "/api/backups", { sandboxId: "s1", tuning: { partSizeMiB: 4 } });
    expect(r.status).toBe(400);
    expect(r.json.error.field).toBe("tuning.partSizeMiB");
  });
});
