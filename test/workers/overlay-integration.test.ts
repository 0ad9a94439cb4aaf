// The seeds' incremental scheme end to end: a squashfs base restored as a writable workspace (squashfuse lower +
// overlayfs), changes made in it, an overlay-delta backup of just the upper directory, and an overlay-restore of
// that delta into a fresh sandbox giving the same merged tree. Real mounts (root, FUSE, overlayfs on this machine).
import { env } from "cloudflare:workers";
import { introspectWorkflow } from "cloudflare:test";
import { afterAll, expect, it } from "vitest";
import { agent, api, freshSandbox, putFile as put, runWorkflow as run } from "./helpers.ts";


const manifest = (sandbox: string) => agent(sandbox, "POST", "/v1/manifest", { path: "/workspace/app" });

const used: string[] = [];
afterAll(async () => {
  for (const sandbox of used) await agent(sandbox, "DELETE", "/v1/sandbox").catch(() => {});
});

it("overlay-restore gives a writable workspace; overlay-delta keeps only its changes; both restore to the same tree", async () => {
  const src = freshSandbox("src");
  const work = freshSandbox("work");
  const dst = freshSandbox("dst");
  used.push(src, work, dst);
  await agent(src, "POST", "/v1/datasets", { path: "/workspace/app", kind: "tricky", seed: 21 });
  const base = await run("backup", { sandboxId: src, path: "/workspace/app", strategy: "squashfs-zstd-3" });

  // The base as a writable workspace.
  const opened = await run("restore", { snapshotId: base.snapshotId, sandboxId: work, path: "/workspace/app", strategy: "overlay-restore" });
  expect(opened.steps.materialize.upper).toMatch(/^\/snapflow\/overlays\//);
  expect((await manifest(work)).entries).toEqual((await manifest(src)).entries);
  const mounts = (await agent(work, "GET", "/v1/mounts")).mounts;
  expect(mounts.map((m: any) => m.kind).sort()).toEqual(["image", "overlay"]);

  // Change it: a new file, an edited file, a deleted file (a whiteout in the upper directory).
  await put(work, "/workspace/app/new/added.txt", "added in the overlay\n");
  await put(work, "/workspace/app/plain.txt", "edited in the overlay\n");
  await agent(work, "DELETE", `/v1/files?path=${encodeURIComponent("/workspace/app/read-only.txt")}`);
  // A directory deleted and made again: opaque in the upper, a mark tar does not carry (the restore sets it again).
  const before = (await manifest(work)).entries;
  const remade = before.find((e: any) => e.type === "dir" && !e.path.includes("/") && before.some((x: any) => x.path.startsWith(`${e.path}/`))).path;
  await agent(work, "DELETE", `/v1/files?path=${encodeURIComponent(`/workspace/app/${remade}`)}`);
  await put(work, `/workspace/app/${remade}/again.txt`, "made again in the overlay\n");
  const expected = await manifest(work);
  expect(expected.entries.map((e: any) => e.path)).not.toContain("read-only.txt");

  const delta = await run("backup", { sandboxId: work, path: "/workspace/app", strategy: "overlay-delta", baseSnapshotId: base.snapshotId });
  const record = (await api("GET", `/api/snapshots/${delta.snapshotId}`)).json;
  expect(record.delta).toEqual({ kind: "overlay-upper", base: base.snapshotId, chain: [base.snapshotId] });
  // The delta holds the changes, not the tree: far smaller than the base image.
  expect(record.archive.bytes).toBeLessThan(base.steps.transfer.bytes);

  const restored = await run("restore", { snapshotId: delta.snapshotId, sandboxId: dst, path: "/workspace/app", strategy: "overlay-restore" });
  expect(restored.steps.transfer.layers).toBe(2);
  expect(restored.steps.transfer.opaque).toBe(1);
  expect((await manifest(dst)).entries).toEqual(expected.entries);

  // The API lists the restore's mounts — the image, the read-only stack of the delta over it, the writable overlay
  // — and takes them down (what stands on the image first).
  const listed = await api("GET", `/api/sandboxes/${dst}/mounts`);
  const paths = listed.json.mounts.map((m: any) => m.path);
  expect(paths).toHaveLength(3);
  expect(paths).toEqual(expect.arrayContaining(["/workspace/app", expect.stringMatching(/^\/snapflow\/mnt\//)]));
  const image = listed.json.mounts.find((m: any) => m.kind === "image").path;
  const stack = listed.json.mounts.find((m: any) => m.kind === "overlay" && !m.upper).path;
  const down = await api("DELETE", `/api/sandboxes/${dst}/mounts?path=${encodeURIComponent(image)}`);
  expect(down.json.unmounted).toEqual(["/workspace/app", stack, image]);
  expect((await api("GET", `/api/sandboxes/${dst}/mounts`)).json.mounts).toEqual([]);
  expect((await api("DELETE", `/api/sandboxes/${dst}/mounts?path=/etc`)).json.error.field).toBe("path");
});

it("overlay-delta needs an overlay at the path, and a squashfs base", async () => {
  const src = freshSandbox("src");
  used.push(src);
  await agent(src, "POST", "/v1/datasets", { path: "/workspace/app", kind: "tricky", seed: 22 });
  const tarBase = await run("backup", { sandboxId: src, path: "/workspace/app", strategy: "tar-zst-pipe" });
  const refused = await api("POST", "/api/backups", { sandboxId: src, path: "/workspace/app", strategy: "overlay-delta", baseSnapshotId: tarBase.snapshotId });
  expect(refused.status).toBe(400);
  expect(refused.json.error.field).toBe("baseSnapshotId");

  const image = await run("backup", { sandboxId: src, path: "/workspace/app", strategy: "squashfs-lz4" });
  await using wf = await introspectWorkflow(env.BACKUP_WORKFLOW);
  await wf.modifyAll(async (m) => m.disableRetryDelays());
  const started = await api("POST", "/api/backups", { sandboxId: src, path: "/workspace/app", strategy: "overlay-delta", baseSnapshotId: image.snapshotId });
  const [instance] = await wf.get();
  await instance!.waitForStatus("errored");
  expect((await api("GET", `/api/backups/${started.json.id}`)).json.error).toMatch(/no overlay is mounted at \/workspace\/app/);
});
