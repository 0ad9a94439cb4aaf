// Disk space as a precondition, and a full disk as a permanent failure, on a real small disk: one sandbox's whole
// root is a 24 MiB tmpfs that test/global-setup.ts mounts (root only; otherwise these tests say why they skip).
// Through the real stack: Workflows in workerd, the real agent writing to that tmpfs, the real S3 server.
import { env } from "cloudflare:workers";
import { introspectWorkflow } from "cloudflare:test";
import { agentTokenFor } from "../../container/contract/agent-token.ts";
import { describe, expect, it } from "vitest";
import { agent, api, faultRow, leftovers, openUploads, runWorkflow, sandboxLeftovers, testStore } from "./helpers.ts";

const small = JSON.parse((env as unknown as { TEST_SMALL_DISK: string }).TEST_SMALL_DISK) as { sandboxId: string; bytes: number } | { skipped: string };
const skipped = "skipped" in small ? small.skipped : undefined;
const sb = "sandboxId" in small ? small.sandboxId : "";

const manifest = (sandbox: string, path: string) => agent(sandbox, "POST", "/v1/manifest", { path });
const remove = (sandbox: string, path: string) => agent(sandbox, "DELETE", `/v1/files?path=${encodeURIComponent(path)}`);
/** An incompressible tree of about `mb` MB (the added-data dataset: random bytes over a small base). */
const bigTree = (sandbox: string, path: string, mb: number) =>
  agent(sandbox, "POST", "/v1/datasets", { path, kind: "added-data", seed: 5, files: 40, bytes: 100_000, addedBytes: mb * 1e6, replace: true });

async function writeBytes(sandbox: string, path: string, bytes: number): Promise<void> {
  const r = await fetch(`${env.AGENT_URL}/v1/files?path=${encodeURIComponent(path)}`, {
    method: "PUT",
    headers: { authorization: `Bearer ${await agentTokenFor(env.AGENT_SECRET, sandbox)}`, "x-snapflow-sandbox": sandbox },
    body: new Uint8Array(bytes).fill(7),
  });
  if (r.status !== 200) throw new Error(`writing ${path}: ${r.status} ${await r.text()}`);
}

describe.skipIf(skipped)(`a small sandbox disk (24 MiB tmpfs)${skipped ? ` — SKIPPED: ${skipped}` : ""}`, () => {
  // The tests share the one small disk and run in order: each leaves it as the next expects.
  let snapshotId = "";

  it("a staged backup that fills the disk fails at once, naming what did not fit; the partial archive is gone; streaming fits", async () => {
    await bigTree(sb, "/workspace/app", 14);
    const t = Date.now();
    const b = await runWorkflow("backup", { sandboxId: sb, path: "/workspace/app", strategy: "tar-zst-direct" }, "errored");
    const ms = Date.now() - t;
    expect(b.error).toMatch(/staging \/snapflow\/staging\/.* ran out of disk.*tar-zst-pipe.*no space left/is);
    expect(b.error).toMatch(/\d+ bytes free of \d+/);
    expect(await sandboxLeftovers(sb, "/workspace/app")).toEqual([]);
    expect((await (await testStore()).list(`snapshots/${b.snapshotId}/`)).objects).toEqual([]);
    expect(await openUploads(`snapshots/${b.snapshotId}/`)).toEqual([]);
    faultRow({ fault: "sandbox disk fills while staging (24 MiB tmpfs)", phase: "backup archive (tar-zst-direct)", outcome: "failed at once (507), naming the staging file and free space; suggests -pipe", retries: 0, ms, leftovers: await leftovers(sb, "/workspace/app", b.snapshotId) });

    const streamed = await runWorkflow("backup", { sandboxId: sb, path: "/workspace/app", strategy: "tar-zst-pipe" });
    snapshotId = streamed.snapshotId;
  });

  it("a restore that cannot fit beside the tree it replaces fails before writing, naming the path, the free space and the shortfall", async () => {
    const before = await manifest(sb, "/workspace/app");
    const t = Date.now();
    const r = await runWorkflow("restore", { snapshotId, sandboxId: sb, path: "/workspace/app", replace: true }, "errored");
    const ms = Date.now() - t;
    expect(r.error).toMatch(new RegExp(`sandbox ${sb} has \\d+ bytes free on the filesystem of /workspace/app; this restore needs about \\d+ \\(the restored tree \\d+ bytes at /workspace/app\\): short by \\d+ bytes`));
    expect(r.steps.transfer).toBeUndefined();
    expect((await manifest(sb, "/workspace/app")).entries).toEqual(before.entries);
    expect(await sandboxLeftovers(sb, "/workspace/app")).toEqual([]);
    // The snapshot lease the request took is released by the run's failure path (the probe keeps it between attempts).
    expect((await (await testStore()).list(`restoring/${snapshotId}/`)).objects).toEqual([]);
    faultRow({ fault: "new tree cannot fit beside the old one (24 MiB tmpfs)", phase: "restore probe", outcome: "failed before writing, naming path, free space, shortfall; old tree intact", retries: 0, ms, leftovers: await leftovers(sb, "/workspace/app") });
  });

  it("the disk filling during extraction (after the check passed) is a permanent failure, and the target is as it was", async () => {
    await remove(sb, "/workspace/app");
    await agent(sb, "POST", "/v1/datasets", { path: "/workspace/app", kind: "tricky", seed: 51 });
    const before = await manifest(sb, "/workspace/app");
    // The first transfer attempt fails (a 503 from the agent) and is retried after its real 5 s delay; in that
    // gap the disk fills with something else's 12 MB, so the 14 MB extraction meets a full disk.
    await agent(sb, "POST", "/v1/faults", { route: "POST /v1/download", times: 1 });
    await using wf = await introspectWorkflow(env.RESTORE_WORKFLOW);
    const t0 = Date.now();
    const started = await api("POST", "/api/restores", { snapshotId, sandboxId: sb, path: "/workspace/app", replace: true });
    expect(started.status).toBe(202);
    for (let i = 0; i < 100 && !(await api("GET", `/api/restores/${started.json.id}`)).json.steps?.probe; i++) await new Promise((r) => setTimeout(r, 50));
    await writeBytes(sb, "/workspace/filler.bin", 12 * 2 ** 20);
    const [instance] = await wf.get();
    await instance!.waitForStatus("errored");
    const r = (await api("GET", `/api/restores/${started.json.id}`)).json;
    // tar's own words end the message: ENOSPC ("No space left on device"), or a short write when the disk filled
    // mid-block ("Wrote only 4096 of 10240 bytes"), which tar reports without an errno.
    expect(r.error).toMatch(/no space left on the sandbox's disk during POST \/v1\/download; \d+ bytes free of \d+ now: .*(No space left on device|Wrote only \d+ of \d+ bytes)/);
    expect((await manifest(sb, "/workspace/app")).entries).toEqual(before.entries);
    expect(await sandboxLeftovers(sb, "/workspace/app")).toEqual([]);
    faultRow({ fault: "sandbox disk fills during extraction (after the check passed)", phase: "restore transfer (pipe)", outcome: "failed (507, permanent), naming the disk's free space; old tree intact", retries: "1 (the injected 503 before it; none for ENOSPC)", ms: Date.now() - t0, leftovers: await leftovers(sb, "/workspace/app") });
    await remove(sb, "/workspace/filler.bin");
  });
});

it("the space check counts a staged archive and the tree together when they share a disk", async () => {
  const { restoreNeeds } = await import("../../src/restore/space-check.ts");
  const { findRestore } = await import("../../src/strategies/registry.ts");
  const probed = { snapshot: { manifest: { bytes: 1000, files: 2, dirs: 1, symlinks: 0 } }, layers: [{ archive: { bytes: 300 } }] } as never;
  expect(restoreNeeds(findRestore("restore-tar-zst")!, "/workspace/app", probed)).toEqual([
    { path: "/workspace/app", bytes: 1000 + 3 * 4096, what: "the restored tree" },
    { path: "/snapflow/staging", bytes: 300, what: "the staged archive" },
  ]);
  expect(restoreNeeds(findRestore("presigned-tar-zst-pipe")!, "/workspace/app", probed)).toHaveLength(1);
  // What a plan keeps, as it says (restore-plan.ts keeps): a mounted image, an overlay's base and layers.
  expect(restoreNeeds(findRestore("presigned-squashfs-mount")!, "/workspace/app", probed)).toEqual([{ path: "/snapflow/images", bytes: 300, what: "the image to mount" }]);
  expect(restoreNeeds(findRestore("overlay-restore")!, "/workspace/app", probed)).toEqual([{ path: "/snapflow/images", bytes: 300, what: "the base image and the overlay's layer" }]);
});
