// The single-pass routes over real HTTP against a host agent: POST and GET /v1/archive with manifestOut (and a
// base, for a delta), POST and PUT /v1/extract with an expected manifest file, /v1/verify-tree metadata-only and
// deep, and a lying manifest answered with 422 verify_failed.
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agentTokenFor } from "../../container/contract/agent-token.ts";
import { createAgentServer } from "../../container/http/server.ts";

const SECRET = "test-secret-" + randomBytes(6).toString("hex");
const SANDBOX = "single-pass";
let server: Server;
let base: string;
let url: string;

beforeAll(async () => {
  base = mkdtempSync(join(tmpdir(), "snapflow-single-pass-routes-"));
  // No store here: the origin only has to be one no test URL is on.
  server = createAgentServer({ auth: { secret: SECRET }, sandboxesDir: join(base, "sandboxes"), storeOrigins: ["http://store.invalid:9000"], faults: false });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  rmSync(base, { recursive: true, force: true });
});

async function call(method: string, path: string, body?: unknown): Promise<Response> {
  const headers: Record<string, string> = { authorization: `Bearer ${await agentTokenFor(SECRET, SANDBOX)}`, "x-snapflow-sandbox": SANDBOX };
  const raw = body instanceof Uint8Array;
  if (body !== undefined && !raw) headers["content-type"] = "application/json";
  return fetch(`${url}${path}`, { method, headers, body: body === undefined ? undefined : raw ? (body as BodyInit) : JSON.stringify(body) });
}
async function ok(r: Promise<Response>): Promise<any> {
  const res = await r;
  const body = await res.json();
  expect(res.status, JSON.stringify(body)).toBe(200);
  return body;
}
const format = { kind: "tar", compression: "zstd" } as const;

describe("single-pass routes", () => {
  it("archive with manifestOut, extract verified in the stream, verify-tree by metadata, a delta against the manifest", async () => {
    await ok(call("POST", "/v1/datasets", { path: "/workspace/src", kind: "tricky", seed: 5, replace: true }));
    const made = await ok(call("POST", "/v1/archive", { path: "/workspace/src", output: "/snapflow/staging/a.tar.zst", format, manifestOut: "/snapflow/staging/a.manifest.json" }));
    expect(made).toMatchObject({ bytes: expect.any(Number), sha256: expect.stringMatching(/^[0-9a-f]{64}$/), manifest: { entries: expect.any(Number), totals: { files: expect.any(Number) } } });

    const restored = await ok(call("POST", "/v1/extract", { archive: "/snapflow/staging/a.tar.zst", path: "/workspace/restored", format, expected: { file: "/snapflow/staging/a.manifest.json" } }));
    expect(restored).toMatchObject({ equal: true, sha256: made.sha256, verified: { content: "in-stream", entries: made.manifest.entries, metadata: "walk" } });

    const check = await ok(call("POST", "/v1/verify-tree", { path: "/workspace/restored", expected: { file: "/snapflow/staging/a.manifest.json" } }));
    expect(check).toMatchObject({ equal: true, verified: { content: "not-read", metadata: "walk" } });
    expect(await ok(call("POST", "/v1/verify-tree", { path: "/workspace/restored", expected: { file: "/snapflow/staging/a.manifest.json" }, deep: true }))).toMatchObject({ equal: true, verified: { content: "walk-hash" } });
    // A compaction's check: the hashes of the pass that read the tree once (here the archive's manifest), not read again.
    expect(await ok(call("POST", "/v1/verify-tree", { path: "/workspace/restored", expected: { file: "/snapflow/staging/a.manifest.json" }, deep: true, hashes: { file: "/snapflow/staging/a.manifest.json" } }))).toMatchObject({ equal: true, verified: { content: "hashes-of-one-read" } });
    // Not walked again (walk: false): the pass's manifest is compared as the walk would be; an expected manifest that
    // says another hash for one file differs there, and walk: false without hashes is refused naming walk.
    const manifestText = await (await call("GET", `/v1/files?path=${encodeURIComponent("/snapflow/staging/a.manifest.json")}`)).text();
    expect(await ok(call("POST", "/v1/verify-tree", { path: "/workspace/restored", expected: { file: "/snapflow/staging/a.manifest.json" }, deep: true, hashes: { file: "/snapflow/staging/a.manifest.json" }, walk: false }))).toMatchObject({ equal: true, verified: { content: "hashes-of-one-read", metadata: "the-pass-walk", entries: made.manifest.entries } });
    const parsed = JSON.parse(manifestText) as { entries: { path: string; type: string; sha256?: string }[] };
    const victim = parsed.entries.find((e) => e.type === "file" && e.sha256)!;
    await ok(call("PUT", `/v1/files?path=${encodeURIComponent("/snapflow/staging/told.manifest.json")}`, new TextEncoder().encode(manifestText.replace(victim.sha256!, "0".repeat(64)))));
    const told = await ok(call("POST", "/v1/verify-tree", { path: "/workspace/restored", expected: { file: "/snapflow/staging/told.manifest.json" }, deep: true, hashes: { file: "/snapflow/staging/a.manifest.json" }, walk: false }));
    expect(told).toMatchObject({ equal: false, counts: { changed: 1 }, differences: [{ path: victim.path, kind: "changed", fields: [{ name: "sha256" }] }] });
    const unwalked = await call("POST", "/v1/verify-tree", { path: "/workspace/restored", expected: { file: "/snapflow/staging/a.manifest.json" }, deep: true, walk: false });
    expect(unwalked.status).toBe(400);
    expect((await unwalked.json()).error).toMatchObject({ field: "walk" });
    // Hashes stand in for a deep check's reads only: without deep they are refused, naming the field.
    const shallow = await call("POST", "/v1/verify-tree", { path: "/workspace/restored", expected: { file: "/snapflow/staging/a.manifest.json" }, hashes: { file: "/snapflow/staging/a.manifest.json" } });
    expect(shallow.status).toBe(400);
    expect((await shallow.json()).error).toMatchObject({ field: "hashes" });

    // The streamed archive: the result lands in resultOut, the manifest in manifestOut.
    const q = new URLSearchParams({ path: "/workspace/src", kind: "tar", compression: "zstd", manifestOut: "/snapflow/staging/s.manifest.json", resultOut: "/snapflow/staging/s.result.json" });
    const streamed = new Uint8Array(await (await call("GET", `/v1/archive?${q}`)).arrayBuffer());
    const result = await (await call("GET", `/v1/files?path=${encodeURIComponent("/snapflow/staging/s.result.json")}`)).json();
    expect(result).toMatchObject({ bytes: streamed.length, manifest: { totals: made.manifest.totals } });
    const piped = await ok(call("PUT", `/v1/extract?${new URLSearchParams({ path: "/workspace/piped", kind: "tar", compression: "zstd", expectedFile: "/snapflow/staging/s.manifest.json" })}`, streamed));
    expect(piped).toMatchObject({ equal: true, bytes: streamed.length, verified: { content: "in-stream", metadata: "walk" } });

    // A delta against the first manifest: nothing changed, nothing archived.
    const delta = await ok(call("POST", "/v1/archive", { path: "/workspace/src", output: "/snapflow/staging/d.tar.zst", format, manifestOut: "/snapflow/staging/d.manifest.json", base: { file: "/snapflow/staging/a.manifest.json" } }));
    expect(delta).toMatchObject({ delta: { changed: 0, deleted: [], suspects: 0 }, archived: { entries: 0 } });
  });

  it("a manifest that disagrees with the archive is 422 verify_failed naming the entry", async () => {
    const manifest = await (await call("GET", `/v1/files?path=${encodeURIComponent("/snapflow/staging/a.manifest.json")}`)).json();
    const victim = manifest.entries.find((e: { type: string; sha256?: string }) => e.type === "file" && e.sha256);
    victim.sha256 = "f".repeat(64);
    writeFileSync(join(base, "sandboxes", SANDBOX, "snapflow/staging/lying.json"), JSON.stringify(manifest));
    const r = await call("POST", "/v1/extract", { archive: "/snapflow/staging/a.tar.zst", path: "/workspace/lied-to", format, expected: { file: "/snapflow/staging/lying.json" } });
    const body = await r.json();
    expect(r.status).toBe(422);
    expect(body.error).toMatchObject({ code: "verify_failed", message: expect.stringContaining(`${victim.path}: sha256 expected`) });
  });

  it("a manifest made from a file-level index is fetched from the store's origin only, the field named", async () => {
    const sha = "a".repeat(64);
    const r = await call("POST", "/v1/verify-tree", { path: "/workspace/src", expected: { index: { url: "http://elsewhere.invalid/snapshots/x/index", sha256: sha }, sha256: sha } });
    expect(r.status).toBe(400);
    expect((await r.json()).error).toMatchObject({ code: "bad_request", field: "expected.index.url" });
    // As a layer's base too (an overlay delta over a file-level snapshot).
    const layered = await call("POST", "/v1/verify-tree", { path: "/workspace/src", expected: { url: "http://store.invalid:9000/snapshots/l/manifest.json", base: { index: { url: "http://elsewhere.invalid/i", sha256: sha }, sha256: sha } } });
    expect(layered.status).toBe(400);
    expect((await layered.json()).error).toMatchObject({ code: "bad_request", field: "expected.base.index.url" });
  });

  it("refuses filesFrom with manifestOut, and base without manifestOut", async () => {
    const a = await call("POST", "/v1/archive", { path: "/workspace/src", output: "/snapflow/staging/x.tar.zst", format, manifestOut: "/snapflow/staging/x.json", filesFrom: "/snapflow/staging/list" });
    expect(a.status).toBe(400);
    const b = await call("POST", "/v1/archive", { path: "/workspace/src", output: "/snapflow/staging/x.tar.zst", format, base: { file: "/snapflow/staging/a.manifest.json" } });
    expect((await b.json()).error).toMatchObject({ code: "bad_request", field: "manifestOut" });
  });

  it("a streamed archive whose reader hung up records nothing: the run that left has removed its staging already", async () => {
    await ok(call("POST", "/v1/datasets", { path: "/workspace/big", kind: "node-modules", seed: 7, files: 600, bytes: 40_000_000, replace: true }));
    const resultOut = "/snapflow/staging/gone.result.json";
    const q = new URLSearchParams({ path: "/workspace/big", kind: "tar", compression: "zstd", manifestOut: "/snapflow/staging/gone.manifest.json", resultOut });
    const hangUp = new AbortController();
    const r = await fetch(`${url}/v1/archive?${q}`, { headers: { authorization: `Bearer ${await agentTokenFor(SECRET, SANDBOX)}`, "x-snapflow-sandbox": SANDBOX }, signal: hangUp.signal });
    expect(r.status).toBe(200);
    await r.body!.getReader().read();
    hangUp.abort();
    // The pass notices at its next write; before this change it wrote its failure (a premature close) within milliseconds.
    const file = () => call("GET", `/v1/files?path=${encodeURIComponent(resultOut)}`);
    for (const until = Date.now() + 3000; Date.now() < until; await new Promise((r) => setTimeout(r, 100))) expect((await file()).status).toBe(404);
  });
});
