// Trust only what the Worker can check (issue 12): the real agent uploading to a real S3 server (SeaweedFS 4.48)
// over URLs the Worker's presigner signed. The URL binds the archive's SHA-256 (x-amz-checksum-sha256, signed in
// the query) and If-None-Match: * (a signed header), so a lying agent cannot get other bytes stored under the
// snapshot's key, and nobody can overwrite the archive once it is written.
import { createHash, randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agentTokenFor } from "../../container/contract/agent-token.ts";
import { createAgentServer } from "../../container/http/server.ts";
import { startObjectStore, type ObjectStoreServer } from "../../scripts/stack/object-store-server.ts";
import { uploadExpirySeconds } from "../../src/backup/transfer/presigned-put.ts";
import { s3Presigner, type Presigner } from "../../src/store/presigner.ts";
import { s3Store } from "../../src/store/s3-store.ts";
import { compositeSha256 } from "../../src/store/part-checksums.ts";
import { StoreError } from "../../src/store/object-store.ts";

const sha256Hex = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");
const SECRET = randomBytes(32).toString("hex");
let base: string;
let s3: ObjectStoreServer;
let server: Server;
let agentUrl: string;
let presigner: Presigner;
let store: ReturnType<typeof s3Store>;
const SB = "checksum";

beforeAll(async () => {
  base = mkdtempSync(join(tmpdir(), "snapflow-checksum-"));
  s3 = await startObjectStore({ dir: join(base, "s3"), bucket: "checksum-test", log: () => {} });
  const settings = { endpoint: s3.endpoint, bucket: s3.bucket, region: s3.region, accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey };
  presigner = s3Presigner(settings, 900);
  store = s3Store(settings);
  server = createAgentServer({ auth: { secret: SECRET }, sandboxesDir: join(base, "sandboxes"), storeOrigins: [s3.endpoint] });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  agentUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}, 60_000);

afterAll(async () => {
  server?.closeAllConnections();
  await new Promise((r) => server?.close(r));
  // weed shuts down gracefully in 2–5 s, up to its 10 s grace on a loaded machine: more than the default 10 s hook
  await s3?.stop();
  rmSync(base, { recursive: true, force: true });
}, 30_000);

/** Stages `bytes` as a file in the sandbox, as the archive step would. */
function stage(name: string, bytes: Uint8Array): string {
  const dir = join(base, "sandboxes", SB, "snapflow/staging");
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, name), bytes);
  return `/snapflow/staging/${name}`;
}

async function upload(path: string, url: string): Promise<{ status: number; body: any }> {
  const r = await fetch(`${agentUrl}/v1/upload`, {
    method: "POST",
    headers: { authorization: `Bearer ${await agentTokenFor(SECRET, SB)}`, "x-snapflow-sandbox": SB, "content-type": "application/json" },
    body: JSON.stringify({ path, url, createOnly: true }),
  });
  return { status: r.status, body: await r.json() };
}

it("a lying agent: bytes other than the archive whose SHA-256 it reported are refused by the store, and nothing is stored", async () => {
  const archive = randomBytes(300_000);
  const claimed = sha256Hex(archive);
  // The agent reported `claimed` from its archive step, then sends something else.
  const path = stage("lie.tar", randomBytes(300_000));
  const url = await presigner.url("snapshots/lie/archive.tar", "PUT", { sha256: claimed, createOnly: true });
  const r = await upload(path, url);
  // Refused for good (store_refused, a 4xx the Worker does not retry): the same bytes would be refused again.
  expect(r.status).toBe(422);
  expect(r.body.error).toMatchObject({ code: "store_refused", message: expect.stringMatching(/BadDigest/) });
  expect(r.body.error.message).not.toMatch(/X-Amz-Signature/);
  expect(await store.head("snapshots/lie/archive.tar")).toBeNull();
});

it("an honest upload is stored, and the same URL cannot overwrite it afterwards (If-None-Match: * signed in)", async () => {
  const archive = randomBytes(200_000);
  const url = await presigner.url("snapshots/once/archive.tar", "PUT", { sha256: sha256Hex(archive), createOnly: true });
  expect((await upload(stage("once.tar", archive), url)).status).toBe(200);
  // After the snapshot is recorded, the sandbox tries again with the URL it still holds: other bytes, then the same.
  const again = await upload(stage("evil.tar", randomBytes(200_000)), url);
  expect(again.status).toBe(422);
  expect(again.body.error).toMatchObject({ code: "store_refused", message: expect.stringMatching(/412|PreconditionFailed|BadDigest/) });
  // The same bytes again: the checksum matches, so only If-None-Match stands in the way.
  const same = await upload(stage("once-again.tar", archive), url);
  expect(same.body.error).toMatchObject({ code: "store_refused", message: expect.stringMatching(/412|PreconditionFailed/) });
  // Dropping the If-None-Match header breaks the signature instead of turning the URL into an overwrite.
  const raw = await fetch(url, { method: "PUT", body: archive });
  expect(raw.status).toBe(403);
  const stored = await store.get("snapshots/once/archive.tar");
  expect(sha256Hex(new Uint8Array(await new Response(stored!.body).arrayBuffer()))).toBe(sha256Hex(archive));
});

it("a multipart part URL stops working once the Worker completes the upload", async () => {
  const up = await presigner.createMultipartUpload("snapshots/mp/archive.tar");
  const part = randomBytes(5 * 2 ** 20);
  const url = await presigner.partUrl(up, 1);
  const put = await fetch(url, { method: "PUT", body: part });
  expect(put.status).toBe(200);
  await up.complete([{ partNumber: 1, etag: put.headers.get("etag")!.replaceAll('"', ""), sha256: sha256Hex(part) }]);
  const late = await fetch(url, { method: "PUT", body: randomBytes(5 * 2 ** 20) });
  expect(late.status).toBe(404);
  expect(await late.text()).toMatch(/NoSuchUpload/);
});

/** The real agent cuts a staged file into parts and PUTs them to the upload's presigned part URLs. */
async function uploadParts(path: string, up: { key: string; uploadId: string }, count: number): Promise<{ status: number; body: any }> {
  const urls = await Promise.all(Array.from({ length: count }, (_, i) => presigner.partUrl(up as never, i + 1)));
  const r = await fetch(`${agentUrl}/v1/upload-multipart`, {
    method: "POST",
    headers: { authorization: `Bearer ${await agentTokenFor(SECRET, SB)}`, "x-snapflow-sandbox": SB, "content-type": "application/json" },
    body: JSON.stringify({ source: { file: path }, partSize: 5 * 2 ** 20, concurrency: 2, urls }),
  });
  return { status: r.status, body: await r.json() };
}

describe("multipart parts carry SHA-256 checksums the store checks at completion (presigned, through the agent)", () => {
  const MiB = 2 ** 20;
  const archive = randomBytes(12 * MiB);
  const slices = [archive.subarray(0, 5 * MiB), archive.subarray(5 * MiB, 10 * MiB), archive.subarray(10 * MiB)];

  it("the agent reports each part's SHA-256; the store takes them and keeps their composite, which HeadObject reports", async () => {
    const up = await presigner.createMultipartUpload("snapshots/parts-ok/archive.tar");
    const sent = await uploadParts(stage("parts-ok.tar", archive), up, 3);
    expect(sent.status, JSON.stringify(sent.body)).toBe(200);
    expect(sent.body.parts.map((p: { sha256: string }) => p.sha256)).toEqual(slices.map(sha256Hex));
    await up.complete(sent.body.parts);
    // What S3 defines (SHA-256 of the parts' digests, "-N"), computed here from the bytes, not from the agent's word.
    const composite = `${createHash("sha256").update(Buffer.concat(slices.map((b) => createHash("sha256").update(b).digest()))).digest("base64")}-3`;
    expect(await compositeSha256(slices.map(sha256Hex))).toBe(composite);
    expect(await presigner.storedChecksum("snapshots/parts-ok/archive.tar")).toBe(composite);
  });

  it("a completion that claims another SHA-256 for a part than the part the store holds is refused (BadDigest); nothing is stored", async () => {
    const up = await presigner.createMultipartUpload("snapshots/parts-lie/archive.tar");
    const sent = await uploadParts(stage("parts-lie.tar", archive), up, 3);
    expect(sent.status).toBe(200);
    // The hashes of other bytes than were sent for part 2: what a lying agent reports.
    const claimed = sent.body.parts.map((p: { partNumber: number }) => (p.partNumber === 2 ? { ...p, sha256: sha256Hex(randomBytes(5 * MiB)) } : p));
    const refused = await up.complete(claimed).catch((e) => e);
    expect(refused).toBeInstanceOf(StoreError);
    expect(refused).toMatchObject({ status: 400, kind: "permanent", message: expect.stringMatching(/BadDigest/) });
    // Leaving the hashes out is no way round: an upload opened with SHA-256 part checksums needs them all.
    const bare = await up.complete(sent.body.parts.map(({ partNumber, etag }: { partNumber: number; etag: string }) => ({ partNumber, etag }))).catch((e) => e);
    expect(bare).toMatchObject({ status: 400, kind: "permanent", message: expect.stringMatching(/InvalidRequest/) });
    expect(await store.head("snapshots/parts-lie/archive.tar")).toBeNull();
    await up.abort();
  });
});

it("a presigned PUT URL lives about as long as its upload needs, never longer than the configured expiry", async () => {
  expect(uploadExpirySeconds(0)).toBe(60);
  expect(uploadExpirySeconds(800e6)).toBe(160);
  const short = new URL(await presigner.url("k", "PUT", { sha256: "0".repeat(64), expiresSeconds: uploadExpirySeconds(1e6) }));
  expect(short.searchParams.get("X-Amz-Expires")).toBe("61");
  const capped = new URL(await presigner.url("k", "PUT", { sha256: "0".repeat(64), expiresSeconds: 10 * 3600 }));
  expect(capped.searchParams.get("X-Amz-Expires")).toBe("900");
});
