// The file-level format's extract restore (POST /v1/files/unpack → snapflow-lazy files-unpack) of the real agent
// (in-process, host mode) against the real local store (SeaweedFS): an index and a pack built here from a small tree
// (a stand-in for the backup: each file cut into 64 KiB chunks, one zstd frame each, a zstd-compressed JSON index),
// uploaded, then restored over presigned URLs into a sandbox's directory and compared with the source.
import { createHash, randomBytes } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { zstdCompressSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agentTokenFor } from "../../container/contract/agent-token.ts";
import { createAgentServer } from "../../container/http/server.ts";
import { compareManifests, takeManifest } from "../../container/manifest/manifest.ts";
import { generateDataset } from "../../container/system/dataset.ts";
import type { Manifest } from "../../container/contract/protocol.ts";
import { startObjectStore, type ObjectStoreServer } from "../../scripts/stack/object-store-server.ts";
import type { ObjectStore } from "../../src/store/object-store.ts";
import { presign, s3Store, type S3Settings } from "../../src/store/s3-store.ts";

const SECRET = randomBytes(32).toString("hex");
const SANDBOX = `filecas-${process.pid}`;
const PACK = "snap-filecas-1";
const CHUNK = 64 << 10;
let base: string;
let src: string;
let manifest: Manifest;
let s3: ObjectStoreServer;
let settings: S3Settings;
let store: ObjectStore;
let server: Server;
let agentUrl: string;
let sandboxesDir: string;
let index: Buffer;
let pack: Buffer;

const sha256 = (b: Buffer | string) => createHash("sha256").update(b).digest("hex");

/** The index and pack of `dir` (its manifest's entries plus each file's chunks), as the format describes them. */
function buildIndex(dir: string, m: Manifest): { index: Buffer; pack: Buffer } {
  const frames: Buffer[] = [];
  let offset = 0;
  const chunks: { sha256: string; pack: number; offset: number; stored: number; size: number }[] = [];
  const byName = new Map<string, number>();
  const entries = m.entries.map((e) => {
    const out: Record<string, unknown> = { ...e };
    if (e.type === "other") out.node = "fifo";
    if (e.type !== "file" || e.link || e.size === 0 || e.holes === e.size) return out;
    const content = readFileSync(join(dir, e.path));
    const list: number[] = [];
    for (let at = 0; at < content.length; at += CHUNK) {
      const data = content.subarray(at, at + CHUNK);
      const name = sha256(data);
      if (!byName.has(name)) {
        const frame = zstdCompressSync(data);
        byName.set(name, chunks.length);
        chunks.push({ sha256: name, pack: 0, offset, stored: frame.length, size: data.length });
        frames.push(frame);
        offset += frame.length;
      }
      list.push(byName.get(name)!);
    }
    out.chunks = list;
    return out;
  });
  const pack = Buffer.concat(frames);
  const index = { version: 1, avgChunk: CHUNK, packs: [{ name: PACK, bytes: pack.length, sha256: sha256(pack) }], chunks, entries };
  return { index: zstdCompressSync(Buffer.from(JSON.stringify(index))), pack };
}

beforeAll(async () => {
  base = mkdtempSync(join(tmpdir(), "snapflow-filecas-unpack-"));
  src = join(base, "src");
  await generateDataset(src, { kind: "tricky", seed: 24, replace: true });
  // More than one chunk per file, and two files sharing their chunks.
  const big = randomBytes(300_000);
  writeFileSync(join(src, "big.bin"), big);
  writeFileSync(join(src, "big-copy.bin"), big);
  manifest = await takeManifest(src, { holes: true });
  ({ index, pack } = buildIndex(src, manifest));
  s3 = await startObjectStore({ dir: join(base, "s3"), bucket: "filecas-test", log: () => {} });
  settings = { endpoint: s3.endpoint, bucket: s3.bucket, region: s3.region, accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey };
  store = s3Store(settings);
  await store.put("t/index.zst", new Uint8Array(index));
  await store.put(`t/packs/${PACK}`, new Uint8Array(pack));
  sandboxesDir = join(base, "sandboxes");
  server = createAgentServer({ auth: { secret: SECRET }, sandboxesDir, storeOrigins: [s3.endpoint] });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  agentUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}, 60_000);

afterAll(async () => {
  server?.closeAllConnections();
  if (server) await new Promise((resolve) => server.close(resolve));
  await s3?.stop();
  rmSync(base, { recursive: true, force: true });
}, 30_000);

async function unpack(body: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(`${agentUrl}/v1/files/unpack`, {
    method: "POST",
    headers: { authorization: `Bearer ${await agentTokenFor(SECRET, SANDBOX)}`, "x-snapflow-sandbox": SANDBOX, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

const get = (key: string) => presign(settings, key, "GET", 900);
const inSandbox = (p: string) => join(sandboxesDir, SANDBOX, p);

describe("POST /v1/files/unpack", () => {
  it("makes the index's tree from the store's pack, checked chunk by chunk and walked", async () => {
    const r = await unpack({ path: "/workspace/restored", index: { url: await get("t/index.zst"), sha256: sha256(index) }, packs: { [PACK]: await get(`t/packs/${PACK}`) } });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const files = manifest.entries.filter((e) => e.type === "file" && !e.link).length;
    expect(r.body).toMatchObject({ equal: true, entries: manifest.entries.length, files, walked: { entries: manifest.entries.length }, fetchedBytes: pack.length });
    // The two copies of big.bin share their chunks: fetched once, in fewer requests than chunks.
    expect(r.body.requests).toBeLessThan(r.body.chunks);
    const restored = await takeManifest(inSandbox("workspace/restored"), { holes: true });
    expect(compareManifests(manifest, restored, 20, ["type", "mode", "size", "mtime", "target", "sha256", "link"])).toMatchObject({ equal: true });
    // Nothing of the staging directory is left beside the tree.
    expect(readdirSync(inSandbox("workspace/restored")).filter((n) => n.startsWith(".snapflow-"))).toEqual([]);
  });

  it("reads the index from a sandbox file and refuses it when its SHA-256 is not the record's", async () => {
    mkdirSync(inSandbox("tmp"), { recursive: true });
    writeFileSync(inSandbox("tmp/index.zst"), index);
    const packs = { [PACK]: await get(`t/packs/${PACK}`) };
    const ok = await unpack({ path: "/workspace/from-file", index: { file: "/tmp/index.zst" }, packs });
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    const bad = await unpack({ path: "/workspace/from-file-2", index: { file: "/tmp/index.zst", sha256: "0".repeat(64) }, packs });
    expect(bad.status).toBe(422);
    expect(bad.body.error).toMatchObject({ code: "verify_failed", field: "index" });
    expect(readdirSync(inSandbox("workspace/from-file-2"))).toEqual([]);
  });

  it("fails a damaged pack with verify_failed and leaves nothing in the target", async () => {
    const damaged = Buffer.from(pack);
    damaged[Math.floor(damaged.length / 2)] ^= 0xff;
    await store.put("t/packs/damaged", new Uint8Array(damaged));
    const r = await unpack({ path: "/workspace/damaged", index: { url: await get("t/index.zst"), sha256: sha256(index) }, packs: { [PACK]: await get("t/packs/damaged") } });
    expect(r.status).toBe(422);
    expect(r.body.error).toMatchObject({ code: "verify_failed", field: "packs", message: expect.stringContaining("is damaged") });
    expect(readdirSync(inSandbox("workspace/damaged"))).toEqual([]);
  });

  it("refuses a pack URL that is not the store's, a pack without a URL, and a target that is not empty", async () => {
    const index_ = { url: await get("t/index.zst"), sha256: sha256(index) };
    const foreign = await unpack({ path: "/workspace/x", index: index_, packs: { [PACK]: "http://127.0.0.1:9/elsewhere" } });
    expect(foreign.status).toBe(400);
    expect(foreign.body.error).toMatchObject({ field: `packs.${PACK}` });
    const none = await unpack({ path: "/workspace/y", index: index_, packs: {} });
    expect(none.status).toBe(400);
    expect(none.body.error).toMatchObject({ code: "bad_request", field: "packs", message: expect.stringContaining(PACK) });
    expect(existsSync(inSandbox("workspace/restored"))).toBe(true);
    const full = await unpack({ path: "/workspace/restored", index: index_, packs: { [PACK]: await get(`t/packs/${PACK}`) } });
    expect(full.status).toBe(400);
    expect(full.body.error).toMatchObject({ code: "bad_request", field: "path" });
  });
});
