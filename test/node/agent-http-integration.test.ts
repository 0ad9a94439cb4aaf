// The real agent (container/http/server.ts) in host mode, in-process on 127.0.0.1:0 with fault injection on, driven
// over HTTP with fetch: authentication, the sandbox header, path confinement (syntax and a real symlink to /etc),
// a streamed archive → extract round trip of the tricky dataset for every compression checked with /v1/verify,
// tar's own message for a corrupt archive (tool_failed), an unclassified exception (internal_error), an armed
// fault, and dropping a sandbox.
import { spawnSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync } from "node:fs";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Compression } from "../../container/contract/protocol.ts";
import { agentTokenFor } from "../../container/contract/agent-token.ts";
import { createAgentServer } from "../../container/http/server.ts";
import { startAgent } from "../../scripts/stack/stack.ts";

const SECRET = randomBytes(32).toString("hex");
/** No store runs here: the origin only has to be one the tests' URLs are not on. */
const STORE_ORIGIN = "http://store.invalid:9000";
let server: Server;
let base: string;
let sandboxesDir: string;
let url: string;
let counter = 0;
const fresh = (label: string) => `${label}-${process.pid}-${counter++}`;

beforeAll(async () => {
  base = mkdtempSync(join(tmpdir(), "snapflow-agent-"));
  sandboxesDir = join(base, "sandboxes");
  server = createAgentServer({ auth: { secret: SECRET }, sandboxesDir, storeOrigins: [STORE_ORIGIN], faults: true });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  rmSync(base, { recursive: true, force: true });
});

async function call(sandbox: string | undefined, method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Response> {
  const h: Record<string, string> = { authorization: `Bearer ${await agentTokenFor(SECRET, sandbox ?? "")}`, ...headers };
  if (sandbox !== undefined) h["x-snapflow-sandbox"] = sandbox;
  const raw = body instanceof Uint8Array;
  if (body !== undefined && !raw) h["content-type"] = "application/json";
  return fetch(`${url}${path}`, { method, headers: h, body: body === undefined ? undefined : raw ? (body as BodyInit) : JSON.stringify(body) });
}

async function json(r: Response | Promise<Response>): Promise<{ status: number; body: any }> {
  const res = await r;
  return { status: res.status, body: await res.json() };
}

describe("start-up", () => {
  // The real entry point (container/agent.ts) as the stack and the image start it; it exits before listening.
  const start = (env: Record<string, string>) =>
    spawnSync(process.execPath, [join(import.meta.dirname, "../../container/agent.ts")], {
      env: { PATH: process.env.PATH!, SNAPFLOW_AGENT_STORE_ORIGIN: STORE_ORIGIN, SNAPFLOW_AGENT_PORT: "0", SNAPFLOW_AGENT_HOST: "127.0.0.1", ...env },
      encoding: "utf8",
      timeout: 20_000,
    });

  it("the local stack starts it with the least it needs: none of the developer's credentials, only its own secret", async () => {
    // What a developer's shell may hold; the stack's agent must not inherit it (a sandbox's code runs beside it).
    const planted = { S3_SECRET_ACCESS_KEY: "planted-s3-secret", API_TOKEN: "planted-api-token", AWS_SECRET_ACCESS_KEY: "planted-aws", GITHUB_TOKEN: "planted-gh" };
    Object.assign(process.env, planted);
    const dir = mkdtempSync(join(tmpdir(), "snapflow-least-"));
    const secret = randomBytes(32).toString("base64url");
    const started = await startAgent({ secret, storeEndpoint: STORE_ORIGIN, sandboxesDir: join(dir, "sandboxes"), logFile: join(dir, "agent.log") });
    try {
      const environ = readFileSync(`/proc/${started.process.child.pid}/environ`, "utf8").split("\0");
      const names = environ.map((kv) => kv.slice(0, kv.indexOf("=")));
      for (const name of Object.keys(planted)) expect(names).not.toContain(name);
      expect(environ.join("\n")).not.toMatch(/planted-/);
      // Bound to loopback, not every interface.
      expect(started.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(names.filter((n) => n.startsWith("SNAPFLOW_")).sort()).toEqual(["SNAPFLOW_AGENT_FAULTS", "SNAPFLOW_AGENT_HOST", "SNAPFLOW_AGENT_PORT", "SNAPFLOW_AGENT_SANDBOXES_DIR", "SNAPFLOW_AGENT_SECRET", "SNAPFLOW_AGENT_STORE_ORIGIN"]);
    } finally {
      for (const name of Object.keys(planted)) delete process.env[name];
      await started.process.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it.each([
    ["a short secret (host mode)", { SNAPFLOW_AGENT_SANDBOXES_DIR: "/nonexistent", SNAPFLOW_AGENT_SECRET: "change-me" }, /SNAPFLOW_AGENT_SECRET secret to at least 32 random characters.*it has 9/],
    ["a repeated placeholder (host mode)", { SNAPFLOW_AGENT_SANDBOXES_DIR: "/nonexistent", SNAPFLOW_AGENT_SECRET: "change-me-".repeat(4) }, /SNAPFLOW_AGENT_SECRET is not random \(it repeats a shorter pattern\)/],
    ["a hand-made token (in a sandbox)", { SNAPFLOW_AGENT_TOKEN: "0".repeat(64) }, /SNAPFLOW_AGENT_TOKEN is not random \(only 1 distinct characters\)/],
  ])("refuses %s: exit 2, naming the variable", (_what, env, message) => {
    const r = start(env);
    expect(r.status, r.stderr).toBe(2);
    expect(r.stderr).toMatch(message);
    expect(r.stdout).not.toMatch(/listening/);
  });
});

describe("authentication and the sandbox header", () => {
  it("health needs this sandbox's token too: a squatter on the port cannot be told apart otherwise", async () => {
    expect((await fetch(`${url}/v1/health`, { headers: { "x-snapflow-sandbox": "s1" } })).status).toBe(401);
    expect(await json(call("s1", "GET", "/v1/health"))).toEqual({ status: 200, body: { ok: true } });
  });

  it("no token, a wrong token, another sandbox's token, the secret or another scheme is a 401", async () => {
    const TOKEN = await agentTokenFor(SECRET, "s1");
    const other = await agentTokenFor(SECRET, "s2");
    for (const authorization of [undefined, `Bearer ${TOKEN}x`, `Bearer ${TOKEN.slice(0, -1)}`, TOKEN, `Basic ${TOKEN}`, `Bearer ${other}`, `Bearer ${SECRET}`]) {
      const r = await json(fetch(`${url}/v1/probe`, { headers: { "x-snapflow-sandbox": "s1", ...(authorization ? { authorization } : {}) } }));
      expect(r.status, String(authorization)).toBe(401);
      expect(r.body.error).toMatchObject({ code: "unauthorized", field: "authorization" });
    }
  });

  it("a missing or malformed x-snapflow-sandbox header in host mode is a 400 naming it, and creates nothing", async () => {
    const missing = await json(call(undefined, "POST", "/v1/manifest", { path: "/workspace" }));
    expect(missing.status).toBe(400);
    expect(missing.body.error).toMatchObject({ code: "bad_request", field: "x-snapflow-sandbox" });
    expect(missing.body.error.message).toContain("x-snapflow-sandbox");
    for (const bad of ["../escape", "UPPER", "-leading-dash", "a/b", "x".repeat(64)]) {
      const r = await json(call(bad, "GET", "/v1/stat?path=/workspace"));
      expect(r.status, bad).toBe(400);
      expect(r.body.error.field).toBe("x-snapflow-sandbox");
    }
    expect(existsSync(join(base, "escape"))).toBe(false);
  });

  it("an unknown route is a 404", async () => {
    expect((await call("s1", "GET", "/v1/nope")).status).toBe(404);
  });
});

describe("path confinement", () => {
  it("escapes are a 400 naming the field", async () => {
    const sb = fresh("paths");
    const cases: [string, string, unknown, string][] = [
      ["POST", "/v1/manifest", { path: "/workspace/../../etc" }, "path"],
      ["POST", "/v1/manifest", { path: "/etc" }, "path"],
      ["GET", "/v1/stat?path=/etc/passwd", undefined, "path"],
      ["GET", "/v1/files?path=/workspace/../etc/passwd", undefined, "path"],
      ["POST", "/v1/archive", { path: "/workspace", output: "/etc/out.tar", format: { kind: "tar", compression: "none" } }, "output"],
      ["POST", "/v1/datasets", { path: "relative/path", kind: "tricky" }, "path"],
    ];
    for (const [method, path, body, field] of cases) {
      const r = await json(call(sb, method, path, body));
      expect(r.status, `${method} ${path}`).toBe(400);
      expect(r.body.error.field, `${method} ${path}`).toBe(field);
    }
  });

  it("a symlink inside the sandbox to the host's /etc is refused, not followed", async () => {
    const sb = fresh("symlink");
    await json(call(sb, "GET", "/v1/stat?path=/workspace")); // creates the sandbox root
    symlinkSync("/etc", join(sandboxesDir, sb, "workspace/evil"));
    const read = await json(call(sb, "GET", "/v1/files?path=/workspace/evil/hostname"));
    expect(read.status).toBe(400);
    expect(read.body.error).toMatchObject({ code: "path_outside_root", field: "path" });
    const write = await json(call(sb, "PUT", "/v1/files?path=/workspace/evil/snapflow-was-here", new Uint8Array([1])));
    expect(write.status).toBe(400);
    expect(existsSync("/etc/snapflow-was-here")).toBe(false);
  });
});

const MAGIC: Record<Compression, (b: Buffer) => boolean> = {
  none: (b) => b.subarray(257, 262).toString() === "ustar",
  zstd: (b) => b.readUInt32LE(0) === 0xfd2fb528,
  gzip: (b) => b[0] === 0x1f && b[1] === 0x8b,
  pigz: (b) => b[0] === 0x1f && b[1] === 0x8b,
  lz4: (b) => b.readUInt32LE(0) === 0x184d2204,
};
const onPath = (tool: string) => spawnSync("sh", ["-c", `command -v ${tool}`]).status === 0;

describe("archive → extract round trip of the tricky dataset", () => {
  const src = fresh("src");
  let expected: any;

  beforeAll(async () => {
    const made = await json(call(src, "POST", "/v1/datasets", { path: "/workspace/app", kind: "tricky", seed: 21 }));
    expect(made.status).toBe(200);
    expected = (await json(call(src, "POST", "/v1/manifest", { path: "/workspace/app" }))).body;
    expect(expected.totals.symlinks).toBeGreaterThan(0);
  });

  for (const compression of ["none", "zstd", "gzip", "pigz", "lz4"] as const) {
    const tool = compression === "none" ? "tar" : compression;
    const missing = !onPath("tar") || !onPath(tool);
    it.skipIf(missing)(`${compression}${missing ? ` — SKIPPED: ${tool} is not on PATH` : ""}: GET /v1/archive streamed, PUT /v1/extract, verify equal`, async () => {
      const dst = fresh(`dst-${compression}`);
      const archive = await call(src, "GET", `/v1/archive?path=/workspace/app&kind=tar&compression=${compression}`);
      expect(archive.status).toBe(200);
      expect(archive.headers.get("content-type")).toBe("application/octet-stream");
      expect(archive.headers.get("content-length")).toBeNull(); // streamed as tar writes it
      // One branch of the archive streams straight into the other sandbox's extract (a chunked request body,
      // as the pipe strategies send it); the other is kept to check what went through.
      const [toExtract, toCheck] = archive.body!.tee();
      const [extractedRes, kept] = await Promise.all([
        fetch(`${url}/v1/extract?path=/workspace/restored&kind=tar&compression=${compression}`, {
          method: "PUT",
          headers: { authorization: `Bearer ${await agentTokenFor(SECRET, dst)}`, "x-snapflow-sandbox": dst },
          body: toExtract,
          duplex: "half",
        } as RequestInit),
        new Response(toCheck).arrayBuffer(),
      ]);
      const bytes = Buffer.from(kept);
      expect(MAGIC[compression](bytes), "archive starts with the format's magic").toBe(true);
      // --sparse: the 8 MiB sparse file does not travel as 8 MiB of zeros, even uncompressed.
      expect(bytes.length).toBeLessThan(2 * 2 ** 20);

      const extracted = await json(extractedRes);
      expect(extracted.status, JSON.stringify(extracted.body)).toBe(200);
      expect(extracted.body).toMatchObject({ bytes: bytes.length, sha256: createHash("sha256").update(bytes).digest("hex") });

      const verify = await json(call(dst, "POST", "/v1/verify", { path: "/workspace/restored", expected }));
      expect(verify.status).toBe(200);
      expect(verify.body.differences).toEqual([]);
      expect(verify.body).toMatchObject({ equal: true, counts: { missing: 0, extra: 0, changed: 0 }, totals: expected.totals });
      // The restored sparse file is sparse again.
      const sparse = statSync(join(sandboxesDir, dst, "workspace/restored/sparse.img"));
      expect(sparse.blocks * 512).toBeLessThan(sparse.size / 64);
    });
  }

  it("verify reports a difference when the tree does not match", async () => {
    const dst = fresh("dst-differs");
    const archive = Buffer.from(await (await call(src, "GET", "/v1/archive?path=/workspace/app&kind=tar&compression=none")).arrayBuffer());
    expect((await call(dst, "PUT", "/v1/extract?path=/workspace/restored&kind=tar&compression=none", new Uint8Array(archive))).status).toBe(200);
    await call(dst, "DELETE", "/v1/files?path=/workspace/restored/plain.txt");
    const verify = await json(call(dst, "POST", "/v1/verify", { path: "/workspace/restored", expected, limit: 5 }));
    expect(verify.body.equal).toBe(false);
    expect(verify.body.differences).toContainEqual({ path: "plain.txt", kind: "missing" });
  });
});

describe("presigned transfers", () => {
  it("refuses URLs that are not http(s), naming the field, so a caller cannot read or write local files", async () => {
    const sb = fresh("url");
    for (const [path, body] of [
      ["/v1/download", { url: "file:///etc/passwd", output: "/snapflow/staging/x" }],
      ["/v1/upload", { url: "file:///tmp/x", path: "/snapflow/staging/x" }],
      ["/v1/download", { url: "not a url", output: "/snapflow/staging/x" }],
    ] as const) {
      const r = await json(call(sb, "POST", path, body));
      expect(r.status, JSON.stringify(r.body)).toBe(400);
      expect(r.body.error.field).toBe("url");
    }
  });

  it("SSRF: a URL off the object store's origin is refused before any fetch, naming the field", async () => {
    const sb = fresh("ssrf");
    const signed = "X-Amz-Signature=0123456789abcdef";
    for (const [path, body, field] of [
      ["/v1/hash-url", { url: `http://169.254.169.254/latest/meta-data/?${signed}` }, "url"],
      ["/v1/download", { url: `http://127.0.0.1:22/?${signed}`, output: "/snapflow/staging/x" }, "url"],
      ["/v1/upload", { url: `https://attacker.example/drop?${signed}`, path: "/snapflow/staging/x" }, "url"],
      ["/v1/download-ranged", { url: `http://store.invalid.evil.example:9000/k?${signed}`, size: 1, output: "/snapflow/staging/x" }, "url"],
      ["/v1/upload-multipart", { source: { file: "/snapflow/staging/x" }, partSize: 5 * 2 ** 20, urls: [`${STORE_ORIGIN}/b/k?partNumber=1`, `http://other.example/b/k?partNumber=2`] }, "urls.1"],
    ] as const) {
      const r = await json(call(sb, "POST", path, body));
      expect(r.status, JSON.stringify(r.body)).toBe(400);
      expect(r.body.error.field).toBe(field);
      expect(r.body.error.message).toMatch(/object store's origin/);
      expect(r.body.error.message).not.toContain(signed);
    }
  });
});

describe("failures", () => {
  it("a corrupt archive body is a 500 tool_failed carrying tar's message", async () => {
    const sb = fresh("corrupt");
    const garbage = new Uint8Array(randomBytes(4 * 2 ** 20)); // large enough that tar gives up mid-upload
    const plain = await json(call(sb, "PUT", "/v1/extract?path=/workspace/out&kind=tar&compression=none", garbage));
    expect(plain.status).toBe(500);
    expect(plain.body.error.code).toBe("tool_failed");
    expect(plain.body.error.message).toMatch(/^tar .*exited 2: tar: This does not look like a tar archive/);

    const zstd = await json(call(sb, "PUT", "/v1/extract?path=/workspace/out2&kind=tar&compression=zstd", garbage.subarray(0, 100_000)));
    expect(zstd.status).toBe(500);
    expect(zstd.body.error.code).toBe("tool_failed");
    expect(zstd.body.error.message).toMatch(/zstd/);
    expect(zstd.body.error.message).toMatch(/tar: /);
  });

  it("an exception nothing classified is a 500 internal_error (a bug), not a tool's failure", async () => {
    const sb = fresh("internal");
    expect((await call(sb, "PUT", "/v1/files?path=/workspace/plain.txt", new Uint8Array([1]))).status).toBe(200);
    // mkdir below a regular file: no route gives ENOTDIR a code, so it is reported as the agent's own failure.
    const r = await json(call(sb, "PUT", "/v1/files?path=/workspace/plain.txt/inside", new Uint8Array([1])));
    expect(r.status).toBe(500);
    expect(r.body.error.code).toBe("internal_error");
    expect(r.body.error.code).not.toBe("tool_failed");
  });

  it("an armed fault answers 503 once for that sandbox and route, then the route works", async () => {
    const sb = fresh("fault");
    const other = fresh("fault-other");
    const armed = await json(call(sb, "POST", "/v1/faults", { route: "POST /v1/manifest", times: 1 }));
    expect(armed).toEqual({ status: 200, body: { armed: { route: "POST /v1/manifest", times: 1, action: "fail" } } });
    // Another sandbox and another route are unaffected.
    expect((await call(other, "POST", "/v1/manifest", { path: "/workspace" })).status).toBe(200);
    expect((await call(sb, "GET", "/v1/stat?path=/workspace")).status).toBe(200);

    const failed = await json(call(sb, "POST", "/v1/manifest", { path: "/workspace" }));
    expect(failed.status).toBe(503);
    expect(failed.body.error.code).toBe("injected_fault");
    const ok = await json(call(sb, "POST", "/v1/manifest", { path: "/workspace" }));
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({ version: 1, entries: [] });
  });

  it("DELETE /v1/sandbox removes the sandbox's root directory", async () => {
    const sb = fresh("gone");
    expect((await call(sb, "PUT", "/v1/files?path=/workspace/a/b.txt", new Uint8Array([104, 105]))).status).toBe(200);
    const root = join(sandboxesDir, sb);
    expect(existsSync(join(root, "workspace/a/b.txt"))).toBe(true);
    expect(await json(call(sb, "DELETE", "/v1/sandbox"))).toEqual({ status: 200, body: { deleted: sb } });
    expect(existsSync(root)).toBe(false);
    // Other sandboxes are untouched.
    const keep = fresh("keep");
    mkdirSync(join(sandboxesDir, keep), { recursive: true });
    await call(sb, "DELETE", "/v1/sandbox");
    expect(existsSync(join(sandboxesDir, keep))).toBe(true);
  });
});
