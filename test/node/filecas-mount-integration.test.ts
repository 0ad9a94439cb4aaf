// POST /v1/files/mount against the real helper (native/lazy/bin/snapflow-lazy files-mount), a real S3 server
// (SeaweedFS) and a real FUSE mount: a small tree's file-level index and pack, built here from the format's
// description (one chunk per file, each a zstd frame, the index zstd-compressed JSON: version 1, which snapshots
// written before MessagePack keep), served by Range GETs over a presigned URL. The tree answers as it was packed; a
// URL off the store's origin, a mountpoint outside the sandbox's roots, an index that is not the one the record names
// and one with a name leading out are refused; unmounting stops the helper. Given the index's URL, the helper fetches
// it itself, checks it and keeps it at the file named.
import { execFileSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { linkSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { agentTokenFor } from "../../container/contract/agent-token.ts";
import type { LazyStatus } from "../../container/contract/protocol.ts";
import { createAgentServer } from "../../container/http/server.ts";
import { readMountinfo } from "../../container/mounts/mounts.ts";
import { startObjectStore, type ObjectStoreServer } from "../../scripts/stack/object-store-server.ts";
import { s3Presigner, type Presigner } from "../../src/store/presigner.ts";
import { s3Store } from "../../src/store/s3-store.ts";

const SECRET = randomBytes(32).toString("hex");
const SB = "files";
const PACK = "snap-files-1";
const sha256Hex = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");
const zstd = (b: Uint8Array) => execFileSync("zstd", ["-q", "-c", "-3"], { input: b });
let base: string;
let s3: ObjectStoreServer;
let server: Server;
let agentUrl: string;
let presigner: Presigner;
let store: ReturnType<typeof s3Store>;
const host = (path: string) => join(base, "sandboxes", SB, path);

beforeAll(async () => {
  base = mkdtempSync(join(tmpdir(), "snapflow-files-"));
  s3 = await startObjectStore({ dir: join(base, "s3"), bucket: "files-test", log: () => {} });
  const settings = { endpoint: s3.endpoint, bucket: s3.bucket, region: s3.region, accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey };
  presigner = s3Presigner(settings, 900);
  store = s3Store(settings);
  mkdirSync(join(base, "sandboxes", SB), { recursive: true });
  server = createAgentServer({ auth: { secret: SECRET }, sandboxesDir: join(base, "sandboxes"), storeOrigins: [s3.endpoint] });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  agentUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}, 60_000);

afterAll(async () => {
  await call("DELETE", "/v1/sandbox").catch(() => {});
  server?.closeAllConnections();
  await new Promise((r) => server?.close(r));
  await s3?.stop();
  rmSync(base, { recursive: true, force: true });
}, 60_000);

async function call(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const r = await fetch(`${agentUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${await agentTokenFor(SECRET, SB)}`, "x-snapflow-sandbox": SB, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: r.status, body: await r.json() };
}

interface Built { index: Buffer; pack: Buffer }

/** A file-level index and its pack for `dir` (format.go): files in name order, one chunk per non-empty file. */
function buildIndex(dir: string, rename: (path: string) => string = (p) => p): Built {
  const frames: Buffer[] = [];
  const chunks: { sha256: string; pack: number; offset: number; stored: number; size: number }[] = [];
  const entries: Record<string, unknown>[] = [];
  const firstName = new Map<string, string>();
  let at = 0;
  const walk = (rel: string) => {
    for (const name of execFileSync("ls", ["-A", join(dir, rel)], { encoding: "utf8" }).split("\n").filter(Boolean).sort()) {
      const path = rel ? `${rel}/${name}` : name;
      const st = lstatSync(join(dir, path), { bigint: true });
      const e: Record<string, unknown> = { path: rename(path), mode: Number(st.mode & 0o7777n), size: 0, mtime: Number(st.mtimeMs / 1000n), uid: Number(st.uid), gid: Number(st.gid),
        stat: { ino: String(st.ino), dev: String(st.dev), mtimeNs: String(st.mtimeNs), ctimeNs: String(st.ctimeNs) } };
      if (st.isDirectory()) entries.push({ ...e, type: "dir" }), walk(path);
      else if (st.isSymbolicLink()) { const target = readlinkSync(join(dir, path)); entries.push({ ...e, type: "symlink", target, size: target.length }); }
      else if (firstName.has(`${st.ino}`)) entries.push({ ...e, type: "file", size: Number(st.size), link: firstName.get(`${st.ino}`) });
      else {
        firstName.set(`${st.ino}`, path);
        const data = readFileSync(join(dir, path));
        const entry: Record<string, unknown> = { ...e, type: "file", size: data.length };
        if (data.length) {
          const frame = zstd(data);
          chunks.push({ sha256: sha256Hex(data), pack: 0, offset: at, stored: frame.length, size: data.length });
          entry.chunks = [chunks.length - 1];
          frames.push(frame);
          at += frame.length;
        }
        entries.push(entry);
      }
    }
  };
  walk("");
  const pack = Buffer.concat(frames);
  const index = { version: 1, avgChunk: 65536, packs: [{ name: PACK, bytes: pack.length, sha256: sha256Hex(pack) }], chunks, entries };
  return { index: zstd(Buffer.from(JSON.stringify(index))), pack };
}

function helpers(mountpoint: string): string[] {
  try {
    return execFileSync("pgrep", ["-f", `snapflow-lazy files-mount .*--mountpoint ${mountpoint}`], { encoding: "utf8" }).trim().split("\n").filter(Boolean);
  } catch {
    return []; // pgrep exits 1 when nothing matches
  }
}

it("serves the packed tree read-only, completes, refuses what it must, and stops its helper when unmounted", async () => {
  const src = join(base, "src");
  mkdirSync(join(src, "lib/deep"), { recursive: true });
  const files: Record<string, Buffer> = { "lib/a.js": Buffer.from("module.exports = 1;\n"), "lib/deep/blob.bin": randomBytes(300_000), "readme.md": Buffer.from("# hi\n"), "empty": Buffer.alloc(0) };
  for (const [name, data] of Object.entries(files)) writeFileSync(join(src, name), data);
  symlinkSync("lib/a.js", join(src, "main.js"));
  linkSync(join(src, "readme.md"), join(src, "lib/readme-link.md"));
  const built = buildIndex(src);
  await store.put(`packs/${PACK}`, built.pack);
  const urls = { [PACK]: await presigner.url(`packs/${PACK}`, "GET") };
  mkdirSync(host("snapflow/staging"), { recursive: true });
  writeFileSync(host("snapflow/staging/files.idx"), built.index);
  const index = { file: "/snapflow/staging/files.idx", sha256: sha256Hex(built.index) };

  const refusals: [unknown, number, RegExp][] = [
    [{ index, urls: { [PACK]: "http://elsewhere.example/p" }, mountpoint: "/workspace/ro" }, 400, /^urls\./],
    [{ index, urls, mountpoint: "/etc/ro" }, 400, /^mountpoint/],
    [{ index: { ...index, sha256: "0".repeat(64) }, urls, mountpoint: "/workspace/ro" }, 422, /^index/],
    [{ index: { ...index, file: "/snapflow/staging/none.idx" }, urls, mountpoint: "/workspace/ro" }, 404, /^index/],
  ];
  for (const [body, status, field] of refusals) {
    const r = await call("POST", "/v1/files/mount", body);
    expect(r.status, JSON.stringify(r.body)).toBe(status);
    expect(r.body.error.field).toMatch(field);
  }
  // An index naming an entry outside the tree is refused before anything is mounted.
  const escaping = buildIndex(src, (p) => (p === "readme.md" ? "lib/../../escape" : p));
  writeFileSync(host("snapflow/staging/bad.idx"), escaping.index);
  const bad = await call("POST", "/v1/files/mount", { index: { file: "/snapflow/staging/bad.idx", sha256: sha256Hex(escaping.index) }, urls, mountpoint: "/workspace/bad" });
  expect(bad.status, JSON.stringify(bad.body)).toBe(400);
  expect(bad.body.error.code).toBe("path_outside_root");
  expect((await call("GET", "/v1/mounts")).body.mounts).toEqual([]);

  const mounted = await call("POST", "/v1/files/mount", { index, urls, mountpoint: "/workspace/ro" });
  expect(mounted.status, JSON.stringify(mounted.body)).toBe(200);
  console.log(`files mount: ${mounted.body.ms} ms (helper ready ${mounted.body.readyMs} ms, exec → ready line ${mounted.body.fuseMs} ms)`);
  expect(mounted.body).toMatchObject({ entries: 8, chunks: 3, mounted: { path: "/workspace/ro", kind: "lazy", how: "fuse" } });
  const ro = host("workspace/ro");
  for (const [name, data] of Object.entries(files)) expect(readFileSync(join(ro, name)).equals(data), name).toBe(true);
  expect(readlinkSync(join(ro, "main.js"))).toBe("lib/a.js");
  expect(lstatSync(join(ro, "lib/readme-link.md")).ino).toBe(lstatSync(join(ro, "readme.md")).ino);
  expect(lstatSync(join(ro, "lib/deep/blob.bin")).mtimeMs).toBe(lstatSync(join(src, "lib/deep/blob.bin")).mtimeMs);
  expect(() => writeFileSync(join(ro, "new"), "x")).toThrow();

  const done = (await call("POST", "/v1/lazy/wait", { work: mounted.body.work, timeoutMs: 30_000 })).body as LazyStatus;
  expect(done.state).toBe("complete");
  expect(done.completeMs).toBeGreaterThanOrEqual(0);
  expect(done.failed).toEqual([]);

  const dir = realpathOf(ro);
  expect(helpers(dir)).toHaveLength(1);
  const down = await call("DELETE", `/v1/mounts?path=${encodeURIComponent("/workspace/ro")}`);
  expect(down.status, JSON.stringify(down.body)).toBe(200);
  expect((await readMountinfo()).some((m) => m.mountPoint === dir)).toBe(false);
  expect(helpers(dir)).toEqual([]);
  expect((await call("GET", "/v1/mounts")).body.mounts).toEqual([]);
}, 60_000);

it("fetches the index from the store itself when given its URL, checks it, and keeps it at the file named", async () => {
  const src = join(base, "src-fetched");
  mkdirSync(join(src, "d"), { recursive: true });
  const data = randomBytes(70_000);
  writeFileSync(join(src, "d/f.bin"), data);
  const built = buildIndex(src);
  await store.put(`packs/${PACK}`, built.pack);
  await store.put("indexes/fetched.idx", built.index);
  const urls = { [PACK]: await presigner.url(`packs/${PACK}`, "GET") };
  const index = { file: "/snapflow/staging/fetched.idx", sha256: sha256Hex(built.index), url: await presigner.url("indexes/fetched.idx", "GET") };
  const refusals: [unknown, number, RegExp][] = [
    [{ index: { ...index, url: "http://elsewhere.example/i" }, urls, mountpoint: "/workspace/f" }, 400, /^index\.url/],
    [{ index: { ...index, sha256: "0".repeat(64) }, urls, mountpoint: "/workspace/f" }, 422, /^index/],
  ];
  for (const [body, status, field] of refusals) {
    const r = await call("POST", "/v1/files/mount", body);
    expect(r.status, JSON.stringify(r.body)).toBe(status);
    expect(r.body.error.field).toMatch(field);
  }
  // Refused: nothing kept where the index would be (a damaged object never becomes a base's kept copy).
  expect(() => lstatSync(host("snapflow/staging/fetched.idx"))).toThrow();
  const mounted = await call("POST", "/v1/files/mount", { index, urls, mountpoint: "/workspace/f" });
  expect(mounted.status, JSON.stringify(mounted.body)).toBe(200);
  expect(readFileSync(join(host("workspace/f"), "d/f.bin")).equals(data)).toBe(true);
  expect(readFileSync(host("snapflow/staging/fetched.idx")).equals(built.index)).toBe(true);
  expect((await call("DELETE", `/v1/mounts?path=${encodeURIComponent("/workspace/f")}`)).status).toBe(200);
}, 60_000);

function realpathOf(p: string): string {
  return execFileSync("realpath", [p], { encoding: "utf8" }).trim();
}
