// snapflow doctor against the test stack (the real agent, SeaweedFS behind our fault proxy, the Workflows): all
// green as the stack stands, and every store behaviour it relies on shown able to fail, by breaking it for real in
// the proxy and finding the doctor name that check. Also: the SDK's own backup preset is reported unavailable here,
// with the reason (no SDK container: the local transport).
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { CLEANUP_CHECK } from "../../src/doctor/doctor.ts";
import { RUN_CHECKS } from "../../src/doctor/run-checks.ts";
import { SANDBOX_CHECKS } from "../../src/doctor/sandbox-checks.ts";
import { STORE_CHECKS } from "../../src/doctor/store-checks.ts";
import { agent, api, freshSandbox, runWorkflow } from "./helpers.ts";

interface Report {
  id: string;
  ok: boolean;
  checks: { check: string; ok: boolean; detail: string; ifMissing: string; skipped?: string; advisory?: true }[];
  made: { sandboxId: string; prefix: string; snapshots: string[]; restores: string[] };
}

const proxy = (path: string, init?: RequestInit) => fetch(`${env.TEST_FAULT_PROXY}${path}`, init);
/** Arms a fault on the store's proxy for the doctor's own keys only (doctor/<id>/…), which no other test writes. */
const arm = (fault: Record<string, unknown>) => proxy("/__faults", { method: "POST", body: JSON.stringify({ times: 100, ...fault, match: ["/doctor/", ...[fault.match ?? []].flat()] }) });

async function doctor(): Promise<Report> {
  const r = await api("POST", "/api/doctor");
  expect(r.status).toBe(200);
  return r.json;
}

const failing = (r: Report) => r.checks.filter((c) => !c.ok && !c.advisory).map((c) => c.check);

/** Nothing of the run is left: its store prefix, snapshots, restore records, leases (the sandbox is gone too). */
async function expectNothingLeft(r: Report) {
  const list = async (prefix: string) => {
    const u = new URL(`${env.S3_ENDPOINT}/${env.S3_BUCKET}`);
    u.searchParams.set("list-type", "2");
    u.searchParams.set("prefix", prefix);
    const { AwsClient } = await import("aws4fetch");
    const text = await (await new AwsClient({ accessKeyId: env.S3_ACCESS_KEY_ID, secretAccessKey: env.S3_SECRET_ACCESS_KEY, region: "auto", service: "s3" }).fetch(u)).text();
    return [...text.matchAll(/<Key>([^<]+)<\/Key>/g)].map((m) => m[1]);
  };
  expect(await list(r.made.prefix)).toEqual([]);
  for (const id of r.made.snapshots) expect(await list(`snapshots/${id}/`)).toEqual([]);
  for (const id of r.made.restores) expect(await list(`restores/${id}`)).toEqual([]);
  expect(await list(`targets/${r.made.sandboxId}/`)).toEqual([]);
  for (const id of [...r.made.snapshots, ...r.made.restores]) expect(await env.INDEX.get(`run:${id}`)).toBeNull();
  expect((await env.INDEX.list({ prefix: "snapshot:" })).keys.filter((k) => r.made.snapshots.some((id) => k.name.endsWith(id)))).toEqual([]);
  // The sandbox's root directory went with it: the agent lists no mounts and creates the root anew when asked.
  expect(r.checks.find((c) => c.check === CLEANUP_CHECK)).toMatchObject({ ok: true });
}

describe("POST /api/doctor", () => {
  afterEach(async () => {
    await proxy(`/__faults?match=${encodeURIComponent("/doctor/")}`, { method: "DELETE" });
  });

  it("is all green against the local stack, ran every check, timed the runs, and leaves nothing behind", async () => {
    const r = await doctor();
    expect(failing(r), JSON.stringify(r.checks.filter((c) => !c.ok), null, 1)).toEqual([]);
    expect(r.ok).toBe(true);
    // SeaweedFS 4.48 writes an object under a URL signed with an empty x-amz-checksum-sha256, unchecked; it refuses a
    // malformed one. The presigner never signs either, so the doctor warns and the verdict stays ok.
    expect(r.checks.find((c) => c.check === STORE_CHECKS.emptyChecksum)).toMatchObject({ ok: false, advisory: true, detail: expect.stringMatching(/wrote the object/) });
    expect(r.checks.find((c) => c.check === STORE_CHECKS.malformedChecksum)).toMatchObject({ ok: true, advisory: true });
    const names = r.checks.map((c) => c.check);
    for (const name of [...Object.values(STORE_CHECKS), ...Object.values(SANDBOX_CHECKS), RUN_CHECKS.default, CLEANUP_CHECK]) expect(names).toContain(name);
    for (const c of r.checks) expect(c.ifMissing.length, c.check).toBeGreaterThan(10);
    // The default presets ran through the Workflows, 10 MB, verified and timed.
    expect(r.checks.find((c) => c.check === RUN_CHECKS.default)!.detail).toMatch(/backup tar-zst-presigned-multipart \d+ ms .*restore presigned-tar-zst-pipe \d+ ms .*verified/);
    expect(r.made.snapshots).toHaveLength(1);
    // The SDK's own backup is not run here, and says why.
    expect(r.checks.find((c) => c.check === RUN_CHECKS.sdk)).toMatchObject({ ok: true, skipped: expect.stringMatching(/Sandbox SDK container.*SANDBOX_TRANSPORT=local/) });
    await expectNothingLeft(r);
  });

  it("names the checksum checks as failing when the store's path drops the x-amz-checksum-sha256 parameter", async () => {
    await arm({ method: "PUT", action: "strip", match: "x-amz-checksum-sha256", query: ["x-amz-checksum-sha256"] });
    const r = await doctor();
    expect(r.ok).toBe(false);
    const fails = failing(r);
    expect(fails).toContain(STORE_CHECKS.boundPut);
    expect(fails).toContain(STORE_CHECKS.wrongBytes);
    // It tells a refusal for the signature (the parameter was signed) from a refusal for the bytes.
    expect(r.checks.find((c) => c.check === STORE_CHECKS.wrongBytes)!.detail).toMatch(/not for its checksum.*SignatureDoesNotMatch/);
    // What does not hang on that parameter still passes, and the runs (the doctor's keys only were broken) too.
    for (const name of [STORE_CHECKS.oneBucket, STORE_CHECKS.partChecksums, STORE_CHECKS.wrongPart, STORE_CHECKS.composite, RUN_CHECKS.default]) expect(fails).not.toContain(name);
    await expectNothingLeft(r);
  });

  it("names the ranged-GET check as failing when the store's path drops the Range header", async () => {
    await arm({ method: "GET", action: "strip", match: "/ranged", requestHeaders: ["range"] });
    const r = await doctor();
    expect(failing(r)).toEqual([STORE_CHECKS.rangedGet]);
    expect(r.checks.find((c) => c.check === STORE_CHECKS.rangedGet)!.ifMissing).toMatch(/files-extract/);
    await expectNothingLeft(r);
  });

  it("names the composite check as failing when the store reports no checksum on HEAD", async () => {
    await arm({ method: "HEAD", action: "strip", responseHeaders: ["x-amz-checksum-sha256"] });
    const r = await doctor();
    expect(failing(r)).toEqual([STORE_CHECKS.composite]);
    expect(r.checks.find((c) => c.check === STORE_CHECKS.composite)!.detail).toMatch(/reports no SHA-256/);
    expect(r.checks.find((c) => c.check === STORE_CHECKS.composite)!.ifMissing).toMatch(/reads the object back/);
    await expectNothingLeft(r);
  });
});

describe("the SDK's own presets (sdk-backup, sdk-restore)", () => {
  it("is in the registry, and reported unavailable here with the reason", async () => {
    const sandboxId = freshSandbox("sdk-backup");
    const r = await api("GET", `/api/strategies?sandboxId=${sandboxId}`);
    expect(r.status).toBe(200);
    const sdk = r.json.strategies.find((s: { name: string }) => s.name === "sdk-backup");
    expect(sdk).toMatchObject({ kind: "backup", path: "sdk-backup", format: { kind: "squashfs", compression: "lz4" }, available: false });
    expect(sdk.reason).toMatch(/Sandbox SDK container.*local transport.*production only/);
    const restore = r.json.strategies.find((s: { name: string }) => s.name === "sdk-restore");
    expect(restore).toMatchObject({ kind: "restore", path: "sdk-restore", format: { kind: "squashfs" }, available: false });
    expect(restore.reason).toMatch(/Sandbox SDK container.*local transport.*production only/);
    await api("DELETE", `/api/sandboxes/${sandboxId}`);
  });

  it("a restore with sdk-restore is refused at its probe, naming why, and leaves the target as it was", async () => {
    const src = freshSandbox("sdk-restore-src");
    await agent(src, "POST", "/v1/datasets", { path: "/workspace/app", kind: "node-modules", seed: 81, files: 20, bytes: 200_000 });
    const b = await runWorkflow("backup", { sandboxId: src, path: "/workspace/app", strategy: "squashfs-lz4" });
    const dst = freshSandbox("sdk-restore-dst");
    const failed = await runWorkflow("restore", { snapshotId: b.id, sandboxId: dst, path: "/workspace/app", strategy: "sdk-restore" }, "errored");
    expect(failed.error).toMatch(/strategy sdk-restore cannot run in sandbox .*Sandbox SDK container.*production only/);
    expect(failed.steps.probe).toBeUndefined();
    expect(await agent(dst, "GET", `/v1/stat?path=${encodeURIComponent("/workspace/app")}`)).toMatchObject({ exists: false });
    for (const id of [src, dst]) await api("DELETE", `/api/sandboxes/${id}`);
  });
});
