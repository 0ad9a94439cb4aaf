// The parallel presigned transfers (POST /v1/upload-multipart, POST /v1/download-ranged) of the real agent
// (container/http/server.ts, in-process, host mode) against a real S3 server (SeaweedFS, scripts/stack/object-store-server.ts),
// with the Worker's side played by src/store/s3-store.ts: create the multipart upload, presign one UploadPart URL
// per part, complete (or abort) with what the agent answered.
import { spawnSync } from "node:child_process";
import { createHash, randomBytes, randomFillSync } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, openSync, closeSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync, writeSync } from "node:fs";
import { createServer, request, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agentTokenFor } from "../../container/contract/agent-token.ts";
import { createAgentServer } from "../../container/http/server.ts";
import { startObjectStore, type ObjectStoreServer } from "../../scripts/stack/object-store-server.ts";
import { freePort } from "../../scripts/stack/stack.ts";
import type { ObjectStore } from "../../src/store/object-store.ts";
import { presign, s3Client, s3Store, type S3Settings } from "../../src/store/s3-store.ts";

const MiB = 2 ** 20;
const SECRET = randomBytes(32).toString("hex");
const ZSTD1 = { kind: "tar", compression: "zstd", level: 1 } as const;
let base: string;
let s3: ObjectStoreServer;
let settings: S3Settings;
let store: ObjectStore;
let server: Server;
let agentUrl: string;
let sandboxesDir: string;
let counter = 0;
const fresh = (label: string) => `${label}-${process.pid}-${counter++}`;
const SRC = fresh("src");
let expectedManifest: any;
let PROXY_PORT: number;

beforeAll(async () => {
  base = mkdtempSync(join(tmpdir(), "snapflow-presigned-"));
  s3 = await startObjectStore({ dir: join(base, "s3"), bucket: "presigned-test", log: () => {} });
  settings = { endpoint: s3.endpoint, bucket: s3.bucket, region: s3.region, accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey };
  store = s3Store(settings);
  sandboxesDir = join(base, "sandboxes");
  PROXY_PORT = await freePort();
  server = createAgentServer({ auth: { secret: SECRET }, sandboxesDir, storeOrigins: [s3.endpoint, `http://127.0.0.1:${PROXY_PORT}`] });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  agentUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const made = await json(call(SRC, "POST", "/v1/datasets", { path: "/workspace/app", kind: "node-modules", files: 2000, bytes: 40e6 }));
  expect(made.status, JSON.stringify(made.body)).toBe(200);
  expectedManifest = (await json(call(SRC, "POST", "/v1/manifest", { path: "/workspace/app" }))).body;
}, 60_000);

afterAll(async () => {
  server?.closeAllConnections();
  if (server) await new Promise((resolve) => server.close(resolve));
  await s3?.stop();
  rmSync(base, { recursive: true, force: true });
}, 30_000);

async function call(sandbox: string, method: string, path: string, body?: unknown): Promise<Response> {
  return fetch(`${agentUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${await agentTokenFor(SECRET, sandbox)}`, "x-snapflow-sandbox": sandbox, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
}

async function json(r: Response | Promise<Response>): Promise<{ status: number; body: any }> {
  const res = await r;
  return { status: res.status, body: await res.json() };
}

/** The Worker's half: create the upload and presign `n` UploadPart URLs. */
async function startUpload(key: string, n: number): Promise<{ uploadId: string; urls: string[] }> {
  const upload = await store.createMultipartUpload(key);
  const urls = await Promise.all(Array.from({ length: n }, (_, i) => presign(settings, key, "PUT", 900, { partNumber: String(i + 1), uploadId: upload.uploadId })));
  return { uploadId: upload.uploadId, urls };
}

/** ListParts as the store sees them (sizes the server actually received). */
async function listParts(key: string, uploadId: string): Promise<{ partNumber: number; size: number }[]> {
  const r = await s3Client(settings).fetch(`${s3.endpoint}/${s3.bucket}/${key}?uploadId=${encodeURIComponent(uploadId)}`);
  const text = await r.text();
  expect(r.status, text).toBe(200);
  return [...text.matchAll(/<Part>([\s\S]*?)<\/Part>/g)].map((m) => ({
    partNumber: Number(m[1]!.match(/<PartNumber>(\d+)<\/PartNumber>/)![1]),
    size: Number(m[1]!.match(/<Size>(\d+)<\/Size>/)![1]),
  }));
}

async function sha256OfObject(key: string): Promise<{ bytes: number; sha256: string }> {
  const got = await store.get(key);
  expect(got).not.toBeNull();
  const hash = createHash("sha256");
  let bytes = 0;
  for await (const chunk of got!.body as unknown as AsyncIterable<Uint8Array>) {
    hash.update(chunk);
    bytes += chunk.byteLength;
  }
  return { bytes, sha256: hash.digest("hex") };
}

const onPath = (tool: string) => spawnSync("sh", ["-c", `command -v ${tool}`]).status === 0;
/** Processes whose command line mentions `text` (tar's argv carries the tree's host path). */
const processesMentioning = (text: string) => spawnSync("pgrep", ["-f", "-a", text], { encoding: "utf8" }).stdout.split("\n").filter((l) => l && !l.includes("pgrep"));
/** Where the range [first, last] was resumed: the start of the passed GET after its cut one. */
const resumedAt = (seen: string[], first: number, last: number) =>
  Number(
    seen
      .slice(seen.findIndex((x) => x.startsWith(`GET bytes=${first}-${last} cut `)) + 1)
      .map((x) => x.match(new RegExp(`^GET bytes=(\\d+)-${last} pass$`))?.[1])
      .find((start) => start !== undefined),
  );
const tamper = (u: string) => u.replace(/(X-Amz-Signature=[0-9a-f]*)([0-9a-f])/, (_, a: string, c: string) => a + (c === "0" ? "1" : "0"));

/**
 * A proxy in front of the S3 server that misbehaves on purpose: `decide` sees each request and answers "pass",
 * "503" (after reading the body) or {cut: n} (forward the response's head and n body bytes, then drop the
 * connection). The Host header is put back to the S3 server's, so the presigned signatures still match.
 */
async function flakyProxy(decide: (req: IncomingMessage) => "pass" | "503" | { cut: number }): Promise<{ rewrite(u: string): string; seen: string[]; close(): Promise<void> }> {
  const target = new URL(s3.endpoint);
  const seen: string[] = [];
  const proxy = createServer((req, res) => {
    const verdict = decide(req);
    const u = new URL(req.url!, target);
    seen.push([req.method, u.searchParams.get("partNumber"), req.headers.range, typeof verdict === "string" ? verdict : `cut ${verdict.cut}`].filter(Boolean).join(" "));
    if (verdict === "503") {
      req.resume();
      req.on("end", () => res.writeHead(503, { "content-type": "application/xml" }).end("<Error><Code>SlowDown</Code><Message>injected</Message></Error>"));
      return;
    }
    const up = request({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers: { ...req.headers, host: target.host } }, (ur) => {
      res.writeHead(ur.statusCode!, ur.headers);
      if (verdict === "pass") return void ur.pipe(res);
      let left = verdict.cut;
      ur.on("data", (d: Buffer) => {
        if (left <= 0) return;
        const last = d.length >= left;
        // Drop the connection only once the bytes before the cut have reached the socket.
        res.write(d.subarray(0, left), () => last && res.socket?.destroy());
        left -= d.length;
        if (last) ur.destroy();
      });
    });
    up.on("error", () => res.socket?.destroy());
    req.pipe(up);
  });
  // On the one port the agent was told is a store origin (it fetches nothing else); one proxy at a time.
  await new Promise<void>((r) => proxy.listen(PROXY_PORT, "127.0.0.1", r));
  const port = (proxy.address() as AddressInfo).port;
  return {
    rewrite: (u) => u.replace(target.host, `127.0.0.1:${port}`),
    seen,
    close: () => new Promise<void>((r) => (proxy.closeAllConnections(), proxy.close(() => r()))),
  };
}

// The tar.zst of the 40 MB dataset, uploaded by the first test; the ranged extract test restores it.
const ARCHIVE_KEY = "snapshots/app.tar.zst";
let archive: { bytes: number; sha256: string } | undefined;

describe("POST /v1/upload-multipart", () => {
  it("a tar+zstd stream of a ~40 MB dataset, 5 MiB parts, concurrency 3: equal parts, the object's SHA-256 is the agent's", async () => {
    const partSize = 5 * MiB;
    const concurrency = 3;
    const { uploadId, urls } = await startUpload(ARCHIVE_KEY, 20);
    const r = await json(call(SRC, "POST", "/v1/upload-multipart", { source: { archive: { path: "/workspace/app", format: ZSTD1 } }, partSize, concurrency, urls }));
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const { bytes, sha256, parts, peakBufferedBytes, ms } = r.body;
    console.log(`upload-multipart archive: ${bytes} bytes in ${parts.length} parts, ${ms} ms, peakBufferedBytes ${peakBufferedBytes} (bound ${(concurrency + 1) * partSize})`);
    expect(parts.length).toBeGreaterThanOrEqual(3); // the test means something only with several parts
    expect(parts.map((p: any) => p.partNumber)).toEqual(parts.map((_: unknown, i: number) => i + 1));
    parts.slice(0, -1).forEach((p: any) => expect(p.bytes, `part ${p.partNumber}`).toBe(partSize));
    expect(parts.at(-1).bytes).toBeGreaterThan(0);
    expect(parts.at(-1).bytes).toBeLessThanOrEqual(partSize);
    expect(parts.reduce((n: number, p: any) => n + p.bytes, 0)).toBe(bytes);
    expect(peakBufferedBytes).toBeGreaterThanOrEqual(partSize);
    expect(peakBufferedBytes).toBeLessThanOrEqual((concurrency + 1) * partSize);
    // What the server received, part by part.
    expect(await listParts(ARCHIVE_KEY, uploadId)).toEqual(parts.map((p: any) => ({ partNumber: p.partNumber, size: p.bytes })));

    const object = await store.resumeMultipartUpload(ARCHIVE_KEY, uploadId).complete(parts.map((p: any) => ({ partNumber: p.partNumber, etag: p.etag })));
    expect(object.size).toBe(bytes);
    expect(await sha256OfObject(ARCHIVE_KEY)).toEqual({ bytes, sha256 });
    archive = { bytes, sha256 };
  });

  it("with manifestOut, a single pass: the manifest of what was archived is written there, and memory stays bounded", async () => {
    const key = "snapshots/single-pass.tar.zst";
    const partSize = 5 * MiB;
    const concurrency = 2;
    const { uploadId, urls } = await startUpload(key, 20);
    const manifestOut = "/snapflow/staging/single-pass.manifest.json";
    const r = await json(call(SRC, "POST", "/v1/upload-multipart", { source: { archive: { path: "/workspace/app", format: ZSTD1, manifestOut } }, partSize, concurrency, urls }));
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.parts.length).toBeGreaterThanOrEqual(3);
    expect(r.body.peakBufferedBytes).toBeLessThanOrEqual((concurrency + 1) * partSize);
    expect(r.body.manifest).toMatchObject({ totals: expectedManifest.totals, entries: expectedManifest.entries.length });
    const written = JSON.parse(readFileSync(join(sandboxesDir, SRC, manifestOut), "utf8"));
    expect(written.entries.map(({ stat: _s, ...e }: any) => e)).toEqual(expectedManifest.entries);
    await store.resumeMultipartUpload(key, uploadId).abort();
  });

  it("with manifestOut, too few URLs is still a 400 naming urls: tar and the compressor are gone, no manifest is left", async () => {
    const key = "snapshots/single-pass-too-few.tar.zst";
    const { uploadId, urls } = await startUpload(key, 2);
    const manifestOut = "/snapflow/staging/too-few.manifest.json";
    const r = await json(call(SRC, "POST", "/v1/upload-multipart", { source: { archive: { path: "/workspace/app", format: ZSTD1, manifestOut } }, partSize: 5 * MiB, concurrency: 2, urls }));
    expect(r.status).toBe(400);
    expect(r.body.error).toMatchObject({ code: "bad_request", field: "urls" });
    expect(processesMentioning(join(sandboxesDir, SRC)), "tar was killed and reaped before the answer").toEqual([]);
    expect(existsSync(join(sandboxesDir, SRC, manifestOut))).toBe(false);
    await store.resumeMultipartUpload(key, uploadId).abort();
  });

  it("too few URLs for the stream is a 400 naming urls, after the parts in flight settle; nothing is completed", async () => {
    const key = "snapshots/too-few.tar.zst";
    const { uploadId, urls } = await startUpload(key, 2);
    const r = await json(call(SRC, "POST", "/v1/upload-multipart", { source: { archive: { path: "/workspace/app", format: ZSTD1 } }, partSize: 5 * MiB, concurrency: 2, urls }));
    expect(r.status).toBe(400);
    expect(r.body.error).toMatchObject({ code: "bad_request", field: "urls" });
    expect(r.body.error.message).toMatch(/more than 2 parts.*presign more part URLs in urls or choose a larger partSize/);
    // The agent waited for the two parts it had started; the Worker aborts.
    expect((await listParts(key, uploadId)).map((p) => p.size)).toEqual([5 * MiB, 5 * MiB]);
    expect(processesMentioning(join(sandboxesDir, SRC)), "tar was killed and reaped before the answer").toEqual([]);
    await store.resumeMultipartUpload(key, uploadId).abort();
    expect(await store.head(key)).toBeNull();
  });

  it("a tampered presigned URL is an error answer naming the store's refusal, not a hang", async () => {
    const key = "snapshots/tampered.tar.zst";
    const { uploadId, urls } = await startUpload(key, 20);
    urls[1] = tamper(urls[1]!);
    expect(urls[1]).not.toBe((await startUpload(key, 2)).urls[1]);
    const started = Date.now();
    const r = await json(call(SRC, "POST", "/v1/upload-multipart", { source: { archive: { path: "/workspace/app", format: ZSTD1 } }, partSize: 5 * MiB, concurrency: 3, urls }));
    console.log(`tampered URL: ${r.status} after ${Date.now() - started} ms: ${JSON.stringify(r.body)}`);
    expect(r.status).toBe(500);
    expect(r.body.error.code).toBe("tool_failed");
    expect(r.body.error.message).toMatch(/presigned PUT of part 2 answered HTTP 403/);
    expect(r.body.error.message).not.toContain("X-Amz-Signature");
    expect(Date.now() - started).toBeLessThan(15_000);
    expect(processesMentioning(join(sandboxesDir, SRC)), "tar was killed and reaped before the answer").toEqual([]);
    await store.resumeMultipartUpload(key, uploadId).abort();
  });

  it("a part whose PUT gets a 503 is retried from memory and the upload completes; with retries 0 it fails naming the 503", async () => {
    let failedOnce = false;
    const proxy = await flakyProxy((req) => {
      if (req.method === "PUT" && req.url!.includes("partNumber=2&") && !failedOnce) return (failedOnce = true), "503";
      return "pass";
    });
    try {
      const key = "snapshots/retried.tar.zst";
      const { uploadId, urls } = await startUpload(key, 20);
      const r = await json(call(SRC, "POST", "/v1/upload-multipart", { source: { archive: { path: "/workspace/app", format: ZSTD1 } }, partSize: 5 * MiB, concurrency: 3, urls: urls.map(proxy.rewrite) }));
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      expect(proxy.seen.filter((x) => x.startsWith("PUT 2 "))).toEqual(["PUT 2 503", "PUT 2 pass"]);
      await store.resumeMultipartUpload(key, uploadId).complete(r.body.parts);
      expect(await sha256OfObject(key)).toEqual({ bytes: r.body.bytes, sha256: r.body.sha256 });

      failedOnce = false;
      const again = await startUpload("snapshots/not-retried.tar.zst", 20);
      const no = await json(call(SRC, "POST", "/v1/upload-multipart", { source: { archive: { path: "/workspace/app", format: ZSTD1 } }, partSize: 5 * MiB, concurrency: 3, urls: again.urls.map(proxy.rewrite), retries: 0 }));
      expect(no.status).toBe(500);
      expect(no.body.error.message).toMatch(/presigned PUT of part 2 answered HTTP 503 SlowDown/);
      await store.resumeMultipartUpload("snapshots/not-retried.tar.zst", again.uploadId).abort();
    } finally {
      await proxy.close();
    }
  });

  it("refuses a part size below 5 MiB, a non-http URL, and a missing source, naming the field", async () => {
    const source = { archive: { path: "/workspace/app", format: ZSTD1 } };
    const x1 = `${s3.endpoint}/x/1`;
    const cases: [unknown, string][] = [
      [{ source, partSize: 5 * MiB - 1, concurrency: 2, urls: [x1] }, "partSize"],
      [{ source, partSize: 5 * MiB, concurrency: 2, urls: [x1, "file:///etc/passwd"] }, "urls.1"],
      [{ source, partSize: 5 * MiB, concurrency: 2, urls: [] }, "urls"],
      [{ source: { file: "/snapflow/staging/none" }, partSize: 5 * MiB, concurrency: 2, urls: [x1] }, "source.file"],
      [{ source: { archive: { path: "/workspace/none", format: ZSTD1 } }, partSize: 5 * MiB, urls: [x1] }, "source.archive.path"],
      [{ source, partSize: 1024 * MiB, concurrency: 4, urls: [x1] }, "partSize"],
    ];
    for (const [body, field] of cases) {
      const r = await json(call(SRC, "POST", "/v1/upload-multipart", body));
      expect(r.status, field).toBeGreaterThanOrEqual(400);
      expect(r.status, field).toBeLessThan(500);
      expect(r.body.error.field, JSON.stringify(r.body)).toBe(field);
    }
  });

  it("a ~200 MiB staged file: RSS grows by less than (concurrency + 2) × partSize + 64 MiB", async () => {
    const sb = fresh("big");
    await call(sb, "GET", "/v1/stat?path=/snapflow"); // creates the sandbox root
    const size = 200 * MiB + 777;
    const staged = join(sandboxesDir, sb, "snapflow/staging/big.bin");
    mkdirSync(join(sandboxesDir, sb, "snapflow/staging"), { recursive: true });
    // One reused buffer, so making the file leaves no garbage that the upload's allocations could hide in.
    const hash = createHash("sha256");
    const fd = openSync(staged, "w");
    const chunk = Buffer.allocUnsafe(4 * MiB);
    for (let left = size; left > 0; ) {
      const n = Math.min(left, chunk.length);
      randomFillSync(chunk, 0, n);
      hash.update(chunk.subarray(0, n));
      writeSync(fd, chunk, 0, n);
      left -= n;
    }
    closeSync(fd);
    const expectedSha = hash.digest("hex");

    const partSize = 5 * MiB;
    const concurrency = 4;
    const key = "staged/big.bin";
    const { uploadId, urls } = await startUpload(key, 45);
    (globalThis as { gc?: () => void }).gc?.();
    const baseline = process.memoryUsage.rss();
    let peakRss = baseline;
    const sampler = setInterval(() => (peakRss = Math.max(peakRss, process.memoryUsage.rss())), 5);
    let r: { status: number; body: any };
    try {
      r = await json(call(sb, "POST", "/v1/upload-multipart", { source: { file: "/snapflow/staging/big.bin" }, partSize, concurrency, urls }));
    } finally {
      clearInterval(sampler);
    }
    peakRss = Math.max(peakRss, process.memoryUsage.rss());
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const growth = peakRss - baseline;
    const bound = (concurrency + 2) * partSize + 64 * MiB;
    console.log(
      `upload-multipart file: ${r.body.bytes} bytes, ${r.body.parts.length} parts, ${r.body.ms} ms ` +
        `(${((r.body.bytes / MiB / r.body.ms) * 1000).toFixed(0)} MiB/s), peakBufferedBytes ${r.body.peakBufferedBytes}, ` +
        `RSS ${(baseline / MiB).toFixed(0)} → ${(peakRss / MiB).toFixed(0)} MiB (growth ${(growth / MiB).toFixed(1)} MiB, bound ${(bound / MiB).toFixed(0)} MiB)`,
    );
    expect(r.body).toMatchObject({ bytes: size, sha256: expectedSha });
    expect(r.body.parts).toHaveLength(41);
    expect(r.body.peakBufferedBytes).toBeLessThanOrEqual((concurrency + 1) * partSize);
    expect(growth).toBeLessThan(bound);
    const object = await store.resumeMultipartUpload(key, uploadId).complete(r.body.parts);
    expect(object.size).toBe(size);
    expect(await sha256OfObject(key)).toEqual({ bytes: size, sha256: expectedSha });
    rmSync(staged);
  });
});

describe("POST /v1/download-ranged", () => {
  const RANDOM_KEY = "random/object.bin";
  const randomSize = 30 * MiB + 12345;
  let random: { sha256: string };

  beforeAll(async () => {
    const bytes = randomBytes(randomSize);
    random = { sha256: createHash("sha256").update(bytes).digest("hex") };
    await store.put(RANDOM_KEY, new Uint8Array(bytes));
  }, 30_000);

  it("node: 3 MiB ranges, concurrency 4, into a file: the SHA-256 is the object's", async () => {
    const sb = fresh("ranged-file");
    const url = await presign(settings, RANDOM_KEY, "GET", 900);
    const r = await json(call(sb, "POST", "/v1/download-ranged", { url, size: randomSize, output: "/snapflow/staging/object.bin", rangeSize: 3 * MiB, concurrency: 4 }));
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    console.log(`download-ranged node file: ${JSON.stringify(r.body)}`);
    expect(r.body).toMatchObject({ bytes: randomSize, sha256: random.sha256, tool: "node", ranges: 11 });
    expect(statSync(join(sandboxesDir, sb, "snapflow/staging/object.bin")).size).toBe(randomSize);
  });

  it("node with extract: 1 MiB ranges fed in order into tar; the restored tree verifies equal", async () => {
    expect(archive, "the multipart upload test ran first and stored the archive").toBeDefined();
    const sb = fresh("ranged-extract");
    const url = await presign(settings, ARCHIVE_KEY, "GET", 900);
    const concurrency = 4;
    const rangeSize = 1 * MiB;
    const r = await json(call(sb, "POST", "/v1/download-ranged", { url, size: archive!.bytes, extract: { path: "/workspace/restored", format: ZSTD1 }, rangeSize, concurrency }));
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    console.log(`download-ranged node extract: ${JSON.stringify(r.body)}`);
    expect(r.body).toMatchObject({ bytes: archive!.bytes, sha256: archive!.sha256, tool: "node", ranges: Math.ceil(archive!.bytes / rangeSize) });
    expect(r.body.peakBufferedBytes).toBeLessThanOrEqual(concurrency * rangeSize);
    const verify = await json(call(sb, "POST", "/v1/verify", { path: "/workspace/restored", expected: expectedManifest }));
    expect(verify.body.differences).toEqual([]);
    expect(verify.body.equal).toBe(true);
  });

  it("a range whose connection drops mid-body resumes from the byte where it stopped, to a file and into tar", async () => {
    const cut = new Set<string>();
    // The first GET of each range starting at 3 MiB (file) or 2 MiB (extract) is cut after 1 MiB / 100,000 bytes.
    const proxy = await flakyProxy((req) => {
      const range = String(req.headers.range ?? "");
      for (const [start, n] of [[3 * MiB, MiB], [2 * MiB, 100_000]] as const) {
        if (range.startsWith(`bytes=${start}-`) && !cut.has(range)) return cut.add(range), { cut: n };
      }
      return "pass";
    });
    try {
      const sb = fresh("ranged-resume");
      const url = proxy.rewrite(await presign(settings, RANDOM_KEY, "GET", 900));
      const r = await json(call(sb, "POST", "/v1/download-ranged", { url, size: randomSize, output: "/snapflow/staging/object.bin", rangeSize: 3 * MiB, concurrency: 4 }));
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      expect(r.body).toMatchObject({ bytes: randomSize, sha256: random.sha256 });
      expect(proxy.seen, proxy.seen.join("\n")).toContain(`GET bytes=${3 * MiB}-${6 * MiB - 1} cut ${MiB}`);
      // Resumed from where the agent's bytes stopped: at most the 1 MiB sent (what was in flight when the socket
      // broke never arrived), never from the range's start.
      expect(resumedAt(proxy.seen, 3 * MiB, 6 * MiB - 1), proxy.seen.join("\n")).toSatisfy((at: number) => at > 3 * MiB && at <= 4 * MiB);

      const archiveUrl = proxy.rewrite(await presign(settings, ARCHIVE_KEY, "GET", 900));
      const x = await json(call(sb, "POST", "/v1/download-ranged", { url: archiveUrl, size: archive!.bytes, extract: { path: "/workspace/restored", format: ZSTD1 }, rangeSize: MiB, concurrency: 3 }));
      expect(x.status, JSON.stringify(x.body)).toBe(200);
      expect(x.body).toMatchObject({ bytes: archive!.bytes, sha256: archive!.sha256 });
      expect(resumedAt(proxy.seen, 2 * MiB, 3 * MiB - 1), proxy.seen.join("\n")).toSatisfy((at: number) => at > 2 * MiB && at <= 2 * MiB + 100_000);
      const verify = await json(call(sb, "POST", "/v1/verify", { path: "/workspace/restored", expected: expectedManifest }));
      expect(verify.body.equal).toBe(true);
    } finally {
      await proxy.close();
    }
  });

  it.skipIf(!onPath("aria2c"))(`aria2c${onPath("aria2c") ? "" : " — SKIPPED: aria2c is not on PATH"}: -x 4 into a file, the SHA-256 is the object's`, async () => {
    const sb = fresh("ranged-aria2c");
    const url = await presign(settings, RANDOM_KEY, "GET", 900);
    const signature = new URL(url).searchParams.get("X-Amz-Signature")!;
    // Every process's command line while aria2c runs: the URL (its signature) must be on none of them.
    const seen: string[] = [];
    let watching = true;
    const watch = (async () => {
      while (watching) {
        for (const pid of readdirSync("/proc").filter((p) => /^\d+$/.test(p))) {
          try {
            const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ");
            if (cmdline.startsWith("aria2c") || cmdline.includes(signature)) seen.push(cmdline);
          } catch {
            // gone meanwhile
          }
        }
        await new Promise((r) => setImmediate(r));
      }
    })();
    const r = await json(call(sb, "POST", "/v1/download-ranged", { url, size: randomSize, output: "/snapflow/staging/aria.bin", concurrency: 4, tool: "aria2c" }));
    watching = false;
    await watch;
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    console.log(`download-ranged aria2c: ${JSON.stringify(r.body)}`);
    expect(r.body).toMatchObject({ bytes: randomSize, sha256: random.sha256, tool: "aria2c" });
    expect(seen.length, "aria2c was never seen running: the watch proves nothing").toBeGreaterThan(0);
    expect(seen.filter((c) => c.includes(signature))).toEqual([]);
    // Nothing holding the URL is left on disk either.
    expect(readdirSync(join(sandboxesDir, sb, "snapflow/staging"))).toEqual(["aria.bin"]);
    expect(existsSync(join(sandboxesDir, sb, "snapflow/staging/aria.bin.aria2"))).toBe(false);
  });

  it("a wrong size or a tampered URL is an error answer, and no partial file is left", async () => {
    const sb = fresh("ranged-bad");
    const url = await presign(settings, RANDOM_KEY, "GET", 900);
    const wrong = await json(call(sb, "POST", "/v1/download-ranged", { url, size: randomSize + 1, output: "/snapflow/staging/x.bin", rangeSize: 4 * MiB }));
    expect(wrong.status).toBe(500);
    expect(wrong.body.error.message).toMatch(new RegExp(`has ${randomSize} bytes, not the ${randomSize + 1} given as size|Content-Range|HTTP 416`));
    const tampered = tamper(url);
    const bad = await json(call(sb, "POST", "/v1/download-ranged", { url: tampered, size: randomSize, output: "/snapflow/staging/x.bin" }));
    expect(bad.status).toBe(500);
    expect(bad.body.error.message).toMatch(/HTTP 403/);
    expect(bad.body.error.message).not.toContain("X-Amz-Signature");
    expect(existsSync(join(sandboxesDir, sb, "snapflow/staging/x.bin"))).toBe(false);
    // Into tar: the GET's refusal is the answer, not tar's "unexpected end of archive".
    const badExtract = await json(call(sb, "POST", "/v1/download-ranged", { url: tampered, size: randomSize, extract: { path: "/workspace/x", format: ZSTD1 } }));
    expect(badExtract.status).toBe(500);
    expect(badExtract.body.error.message).toMatch(/^presigned GET of bytes .* answered HTTP 403/);
    for (const [body, field] of [
      [{ url, size: 1 }, "output"],
      [{ url: "file:///etc/passwd", size: 1, output: "/snapflow/x" }, "url"],
      [{ url, size: 1, extract: { path: "/workspace/x", format: ZSTD1 }, tool: "aria2c" }, "extract"],
    ] as const) {
      const r = await json(call(sb, "POST", "/v1/download-ranged", body));
      expect(r.status, field).toBe(400);
      expect(r.body.error.field).toBe(field);
    }
  });
});

describe("POST /v1/download to a file (an image restore's transfer)", () => {
  const KEY = "random/image.bin";
  const size = 20 * MiB + 777;
  let object: { sha256: string };

  beforeAll(async () => {
    const bytes = randomBytes(size);
    object = { sha256: createHash("sha256").update(bytes).digest("hex") };
    await store.put(KEY, new Uint8Array(bytes));
  }, 30_000);

  const withEngine = async <T>(engine: "native" | "node", run: () => Promise<T>): Promise<T> => {
    const before = process.env.SNAPFLOW_UNPACK_ENGINE;
    process.env.SNAPFLOW_UNPACK_ENGINE = engine;
    try {
      return await run();
    } finally {
      if (before === undefined) delete process.env.SNAPFLOW_UNPACK_ENGINE;
      else process.env.SNAPFLOW_UNPACK_ENGINE = before;
    }
  };

  it("by the native engine: the file and its SHA-256 are the object's; the agent's own download gives the same", async () => {
    const sb = fresh("get-file");
    const url = await presign(settings, KEY, "GET", 900);
    const native = await withEngine("native", () => json(call(sb, "POST", "/v1/download", { url, output: "/snapflow/images/a.img" })));
    expect(native.status, JSON.stringify(native.body)).toBe(200);
    expect(native.body).toMatchObject({ bytes: size, sha256: object.sha256, engine: "native", attempts: 1 });
    const node = await withEngine("node", () => json(call(sb, "POST", "/v1/download", { url, output: "/snapflow/images/b.img" })));
    expect(node.status, JSON.stringify(node.body)).toBe(200);
    expect(node.body).toMatchObject({ bytes: size, sha256: object.sha256 });
    expect(node.body.engine).toBeUndefined();
    // An object its record says is small is fetched by the agent itself (starting the engine would cost more).
    const small = await withEngine("native", () => json(call(sb, "POST", "/v1/download", { url, output: "/snapflow/images/c.img", size: 28_000 })));
    expect(small.status, JSON.stringify(small.body)).toBe(200);
    expect(small.body).toMatchObject({ bytes: size, sha256: object.sha256 });
    expect(small.body.engine).toBeUndefined();
    const large = await withEngine("native", () => json(call(sb, "POST", "/v1/download", { url, output: "/snapflow/images/d.img", size })));
    expect(large.body).toMatchObject({ bytes: size, sha256: object.sha256, engine: "native" });
    for (const f of ["a.img", "b.img", "c.img", "d.img"]) expect(createHash("sha256").update(readFileSync(join(sandboxesDir, sb, "snapflow/images", f))).digest("hex")).toBe(object.sha256);
    // Nothing of the engine's temporary file is left beside it.
    expect(readdirSync(join(sandboxesDir, sb, "snapflow/images")).sort()).toEqual(["a.img", "b.img", "c.img", "d.img"]);
  });

  it("a body cut mid-way is resumed by Range from the byte where it stopped", async () => {
    let cut = false;
    const proxy = await flakyProxy((req) => (!cut && req.method === "GET" && !req.headers.range ? ((cut = true), { cut: 3 * MiB }) : "pass"));
    try {
      const sb = fresh("get-resume");
      const url = proxy.rewrite(await presign(settings, KEY, "GET", 900));
      const r = await withEngine("native", () => json(call(sb, "POST", "/v1/download", { url, output: "/snapflow/images/a.img" })));
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      expect(r.body).toMatchObject({ bytes: size, sha256: object.sha256, engine: "native", attempts: 2 });
      const resumed = proxy.seen.map((x) => x.match(/^GET bytes=(\d+)- pass$/)?.[1]).find((x) => x !== undefined);
      expect(Number(resumed), proxy.seen.join("\n")).toSatisfy((at: number) => at > 0 && at <= 3 * MiB);
    } finally {
      await proxy.close();
    }
  });

  it("a refused GET is an error answer naming the store's status; the file that was at output is left as it was", async () => {
    const sb = fresh("get-refused");
    const at = join(sandboxesDir, sb, "snapflow/images");
    mkdirSync(at, { recursive: true });
    const before = join(at, "a.img");
    writeFileSync(before, "the image a restore mounted before");
    const url = tamper(await presign(settings, KEY, "GET", 900));
    const r = await withEngine("native", () => json(call(sb, "POST", "/v1/download", { url, output: "/snapflow/images/a.img" })));
    expect(r.status).toBe(500);
    expect(r.body.error.message).toMatch(/presigned GET answered 403/);
    expect(r.body.error.message).not.toContain("X-Amz-Signature");
    expect(readFileSync(before, "utf8")).toBe("the image a restore mounted before");
    expect(readdirSync(at)).toEqual(["a.img"]);
  });
});
