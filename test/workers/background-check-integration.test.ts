// An image snapshot's content checked once, off every restore's path (src/restore/background-check.ts): the backup
// starts a restore into a sandbox of its own, which hashes every file against the manifest, records the check and
// ends its sandbox; later restores anywhere trust the image's SHA-256. The test projects run with
// IMAGE_CONTENT_CHECK=off (vitest.config.ts), so these backups ask for the check themselves.
import { env } from "cloudflare:workers";
import { afterAll, expect, it } from "vitest";
import { depsFrom } from "../../src/deps.ts";
import { checkerSandbox, startContentCheck } from "../../src/restore/background-check.ts";
import { getJson, putJson, snapshotRecordKey, type SnapshotRecord } from "../../src/snapshots/records.ts";
import { agent, api, freshSandbox, putFile, runWorkflow, sha256Hex } from "./helpers.ts";

const used: string[] = [];
afterAll(async () => {
  for (const sandbox of used) await agent(sandbox, "DELETE", "/v1/sandbox").catch(() => {});
});

const recordOf = async (id: string) => (await getJson<SnapshotRecord>(depsFrom(env).store, snapshotRecordKey(id)))!;

/** The check's restore run, once it has ended (complete or errored). */
async function checkRun(restoreId: string): Promise<{ status: string; error?: string; steps: Record<string, { verified?: { by?: string } }> }> {
  for (let i = 0; i < 600; i++) {
    const run = (await api("GET", `/api/restores/${restoreId}`)).json;
    if (run.status === "complete" || run.status === "errored") return run;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`the content check ${restoreId} did not end within 60 s`);
}

it("an image backup is checked in a sandbox of its own right after it is recorded; later restores elsewhere do not walk it", async () => {
  const src = freshSandbox("chk-src");
  const dst = freshSandbox("chk-dst");
  used.push(src, dst);
  await putFile(src, "/workspace/app/a.txt", "checked once\n");
  await putFile(src, "/workspace/app/sub/b.txt", "b\n");
  const b = await runWorkflow("backup", { sandboxId: src, path: "/workspace/app", strategy: "squashfs-zstd-3", contentCheck: "background" });
  let checked: SnapshotRecord["contentChecked"];
  for (let i = 0; i < 600 && !checked; i++) {
    checked = (await recordOf(b.snapshotId)).contentChecked;
    if (!checked) await new Promise((r) => setTimeout(r, 100));
  }
  expect(checked, "the snapshot was never recorded as checked").toMatchObject({ sandboxId: checkerSandbox(b.snapshotId) });
  const run = await checkRun(checked!.restoreId);
  expect(run.status).toBe("complete");
  expect(run.steps.verify!.verified!.by).toMatch(/every file hashed against the manifest \(first restore outside chk-src/);
  // The checker's sandbox was ended with its run: nothing of the restored tree is left there.
  expect((await agent(checkerSandbox(b.snapshotId), "GET", "/v1/stat?path=/workspace/check")).exists).toBe(false);
  await agent(checkerSandbox(b.snapshotId), "DELETE", "/v1/sandbox").catch(() => {});

  const mounted = await runWorkflow("restore", { snapshotId: b.snapshotId, sandboxId: dst, path: "/workspace/app", strategy: "presigned-squashfs-mount" });
  expect(mounted.steps.verify.verified).toMatchObject({ metadata: "image", by: expect.stringMatching(/the mount is not walked/) });
  await api("DELETE", `/api/sandboxes/${dst}/mounts?path=/workspace/app`);
});

it("image-manifest-lie, checked in the background: the check fails, nothing is recorded as checked, and its sandbox is ended", async () => {
  const src = freshSandbox("chk-liar");
  used.push(src);
  await putFile(src, "/workspace/app/a.txt", "what the image holds\n");
  const b = await runWorkflow("backup", { sandboxId: src, path: "/workspace/app", strategy: "squashfs-zstd-3", contentCheck: "off" });
  // What a compromised source achieves at backup: an honest image beside a manifest that says another hash.
  const store = depsFrom(env).store;
  const record = await recordOf(b.snapshotId);
  const m = JSON.parse(await new Response((await store.get(record.manifest.key))!.body).text());
  m.entries.find((e: { path: string }) => e.path === "a.txt").sha256 = "0".repeat(64);
  const lie = JSON.stringify(m);
  await store.put(record.manifest.key, lie);
  await putJson(store, snapshotRecordKey(b.snapshotId), { ...record, manifest: { ...record.manifest, ...(record.manifest.sha256 ? { sha256: await sha256Hex(new TextEncoder().encode(lie)) } : {}) } });

  const started = await startContentCheck(env, depsFrom(env), await recordOf(b.snapshotId));
  if (!("restoreId" in started)) throw new Error(`no check started: ${started.skipped}`);
  const run = await checkRun(started.restoreId);
  expect(run.status).toBe("errored");
  expect(run.error).toMatch(/restored tree differs from snapshot .*a\.txt \(sha256\)/);
  expect((await recordOf(b.snapshotId)).contentChecked).toBeUndefined();
  expect((await agent(started.sandboxId, "GET", "/v1/stat?path=/workspace/check")).exists).toBe(false);
  await agent(started.sandboxId, "DELETE", "/v1/sandbox").catch(() => {});
});
