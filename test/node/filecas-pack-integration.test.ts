// The file-level backup through the agent (POST /v1/files/pack, the engine's files-pack) against a real S3 server
// (SeaweedFS), the Worker's side played by src/store/s3-store.ts: a small tree backed up whole, then again with the
// first index as its base after one file changed, which must store only that file's bytes; the packs completed with
// the parts' SHA-256s (the store refuses others) and read back as the results name them.
import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agentTokenFor } from "../../container/contract/agent-token.ts";
import { FilesPackResult } from "../../container/contract/protocol.ts";
import { createAgentServer } from "../../container/http/server.ts";
import { startObjectStore, type ObjectStoreServer } from "../../scripts/stack/object-store-server.ts";
import type { ObjectStore } from "../../src/store/object-store.ts";
import { presign, s3Store, type S3Settings } from "../../src/store/s3-store.ts";

const MiB = 2 ** 20;
const SECRET = randomBytes(32).toString("hex");
const SANDBOX = `fpack-${process.pid}`;
let base: string;
let s3: ObjectStoreServer;
let settings: S3Settings;
let store: ObjectStore;
let server: Server;
let agentUrl: string;
let tree: string;

beforeAll(async () => {
  base = mkdtempSync(join(tmpdir(), "snapflow-fpack-"));
  s3 = await startObjectStore({ dir: join(base, "s3"), bucket: "fpack-test", log: () => {} });
  settings = { endpoint: s3.endpoint, bucket: s3.bucket, region: s3.region, accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey };
  store = s3Store(settings);
  const sandboxesDir = join(base, "sandboxes");
  server = createAgentServer({ auth: { secret: SECRET }, sandboxesDir, storeOrigins: [s3.endpoint] });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  agentUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const made = await call("POST", "/v1/datasets", { path: "/workspace/app", kind: "node-modules", files: 400, bytes: 8e6 });
  expect(made.status, JSON.stringify(made.body)).toBe(200);
  tree = join(sandboxesDir, SANDBOX, "workspace/app");
}, 60_000);

afterAll(async () => {
  server?.closeAllConnections();
  if (server) await new Promise((resolve) => server.close(resolve));
  await s3?.stop();
  rmSync(base, { recursive: true, force: true });
}, 30_000);

async function call(method: string, path: string, body: unknown): Promise<{ status: number; body: any }> {
  const r = await fetch(`${agentUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${await agentTokenFor(SECRET, SANDBOX)}`, "x-snapflow-sandbox": SANDBOX, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: r.status, body: await r.json() };
}

/** The Worker's half of a pack's upload: open it (parts checked by SHA-256), presign `n` part URLs. */
async function startUpload(key: string, n: number) {
  const upload = await store.createMultipartUpload(key, { partChecksums: "sha256" });
  const urls = await Promise.all(Array.from({ length: n }, (_, i) => presign(settings, key, "PUT", 900, { partNumber: String(i + 1), uploadId: upload.uploadId })));
  return { upload, urls };
}

async function objectSha256(key: string): Promise<{ bytes: number; sha256: string }> {
  const got = await store.get(key);
  const hash = createHash("sha256");
  let bytes = 0;
  for await (const chunk of got!.body as unknown as AsyncIterable<Uint8Array>) {
    hash.update(chunk);
    bytes += chunk.byteLength;
  }
  return { bytes, sha256: hash.digest("hex") };
}

/** One backup through the route; its pack completed in the store when it wrote one. */
async function backup(name: string, extra: Record<string, unknown> = {}) {
  const key = `packs/${name}`;
  const { upload, urls } = await startUpload(key, 4);
  const r = await call("POST", "/v1/files/pack", {
    path: "/workspace/app", manifestOut: `/snapflow/staging/${name}.manifest.json`, indexOut: `/snapflow/staging/${name}.index.zst`,
    name, avgChunk: 64 * 1024, urls, partSize: 5 * MiB, ...extra,
  });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  const result = FilesPackResult.parse(r.body);
  if (result.pack) {
    await upload.complete(result.parts.map((p) => ({ partNumber: p.partNumber, etag: p.etag, sha256: p.sha256 })));
    expect(await objectSha256(key)).toEqual({ bytes: result.pack.bytes, sha256: result.pack.sha256 });
  } else {
    await upload.abort();
  }
  return result;
}

describe("POST /v1/files/pack", () => {
  it("backs a tree up, then again over the first index storing only the changed file's bytes", async () => {
    const first = await backup("s1");
    expect(first.pack).not.toBeNull();
    expect(first.read.files).toBe(first.totals.files);
    expect(first.reused.files).toBe(0);
    const index = join(base, "sandboxes", SANDBOX, "snapflow/staging/s1.index.zst");
    expect(statSync(index).size).toBe(first.index.bytes);
    const manifest = JSON.parse(readFileSync(join(base, "sandboxes", SANDBOX, "snapflow/staging/s1.manifest.json"), "utf8"));
    expect(manifest.entries).toHaveLength(first.entries);

    // One file changed: 200 kB of new bytes, the rest as it was.
    const changed = manifest.entries.find((e: { type: string; size: number }) => e.type === "file" && e.size > 1000).path;
    const fresh = randomBytes(200_000);
    writeFileSync(join(tree, changed), fresh);
    const second = await backup("s2", { base: { file: "/snapflow/staging/s1.index.zst", sha256: first.index.sha256 } });
    expect(second.read).toEqual({ files: 1, bytes: fresh.length });
    expect(second.reused.files).toBe(first.totals.files - 1);
    expect(second.newBytes).toBe(fresh.length);
    // Random bytes do not compress: the pack is the file's bytes and its frames' few headers.
    expect(second.pack!.bytes).toBeGreaterThanOrEqual(fresh.length);
    expect(second.pack!.bytes).toBeLessThan(fresh.length + 4096);

    // The base only in the store (a fresh sandbox), nothing changed since: no part PUT, no pack.
    const indexUrl = await presign(settings, "indexes/s2", "GET", 900);
    await store.put("indexes/s2", readFileSync(join(base, "sandboxes", SANDBOX, "snapflow/staging/s2.index.zst")));
    const third = await backup("s3", { base: { url: indexUrl, sha256: second.index.sha256 } });
    expect(third).toMatchObject({ pack: null, parts: [], newChunks: 0, read: { files: 0, bytes: 0 } });
  });

  it("refuses a base that is not the bytes its record names, a URL off the store, a path out of the roots", async () => {
    const body = { path: "/workspace/app", manifestOut: "/snapflow/staging/x.json", indexOut: "/snapflow/staging/x.zst", name: "x", urls: [`${s3.endpoint}/fpack-test/k?partNumber=1`], partSize: 5 * MiB };
    const wrong = await call("POST", "/v1/files/pack", { ...body, base: { file: "/snapflow/staging/s1.index.zst", sha256: "0".repeat(64) } });
    expect(wrong.status).toBe(400);
    expect(wrong.body.error).toMatchObject({ code: "bad_request", field: "base" });
    const off = await call("POST", "/v1/files/pack", { ...body, urls: [...body.urls, "http://attacker.example/k?partNumber=2"] });
    expect(off.status).toBe(400);
    expect(off.body.error.field).toBe("urls.1");
    const out = await call("POST", "/v1/files/pack", { ...body, indexOut: "/etc/x.zst" });
    expect(out.status).toBe(400);
    expect(out.body.error.field).toBe("indexOut");
  });
});
