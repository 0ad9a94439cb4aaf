// An overlay delta's layer downloaded and extracted by the agent (POST /v1/download, extract without a manifest: the
// wake's transfer, overlay-plan.ts): made by the native engine unchecked (container/extract/engine-unpack.ts), as
// the archive has it — a whiteout kept, a device never made — and still never through a symlink or outside the
// layer. The archives are served from a local HTTP server standing in for the store (the agent takes only URLs on
// its store's origin).
import { createHash, randomBytes } from "node:crypto";
import { lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { agentTokenFor } from "../../container/contract/agent-token.ts";
import { createAgentServer } from "../../container/http/server.ts";
import { compress, tarOf, type TarEntry } from "../fixtures/hostile-corpus.ts";

const SECRET = randomBytes(32).toString("hex");
const served = new Map<string, Uint8Array>();
let base: string;
let store: Server;
let storeUrl: string;
let agentServer: Server;
let agentUrl: string;
let n = 0;

beforeAll(async () => {
  base = mkdtempSync(join(tmpdir(), "snapflow-layer-"));
  store = createServer((req, res) => {
    const body = served.get(req.url ?? "");
    res.writeHead(body ? 200 : 404, { "content-length": body?.byteLength ?? 0 }).end(body);
  });
  await new Promise<void>((r) => store.listen(0, "127.0.0.1", r));
  storeUrl = `http://127.0.0.1:${(store.address() as AddressInfo).port}`;
  agentServer = createAgentServer({ auth: { secret: SECRET }, sandboxesDir: join(base, "sandboxes"), storeOrigins: [storeUrl] });
  await new Promise<void>((r) => agentServer.listen(0, "127.0.0.1", r));
  agentUrl = `http://127.0.0.1:${(agentServer.address() as AddressInfo).port}`;
});
afterAll(async () => {
  for (const s of [store, agentServer]) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
  rmSync(base, { recursive: true, force: true });
});

/** Serves the entries' tar.zst and asks the agent of a fresh sandbox to download it into /workspace/layer. */
async function downloadLayer(entries: TarEntry[]) {
  const sb = `layer-${n++}`;
  const archive = compress(tarOf(entries), "zstd");
  served.set(`/archive-${sb}`, archive);
  const outside = join(base, "sandboxes", sb, "workspace/outside");
  mkdirSync(outside, { recursive: true });
  writeFileSync(join(outside, "sentinel"), "sentinel");
  const r = await fetch(`${agentUrl}/v1/download`, {
    method: "POST",
    headers: { authorization: `Bearer ${await agentTokenFor(SECRET, sb)}`, "x-snapflow-sandbox": sb, "content-type": "application/json" },
    body: JSON.stringify({ url: `${storeUrl}/archive-${sb}`, extract: { path: "/workspace/layer", format: { kind: "tar", compression: "zstd" } } }),
  });
  return { status: r.status, body: (await r.json()) as any, layer: join(base, "sandboxes", sb, "workspace/layer"), outside, sha256: createHash("sha256").update(archive).digest("hex") };
}

it("makes the layer in the engine: files, directories, symlinks and whiteouts as the archive has them, no device", async () => {
  const r = await downloadLayer([
    { name: "d", type: "d", mode: 0o750 },
    { name: "d/new.txt", type: "f", data: "new in the layer" },
    { name: "d/gone", type: "c", dev: [0, 0] },
    { name: "null", type: "c", dev: [1, 3], mode: 0o666 },
    { name: "d/link", type: "l", link: "new.txt" },
  ]);
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  expect(r.body).toMatchObject({ engine: "native", sha256: r.sha256 });
  expect(readFileSync(join(r.layer, "d/new.txt"), "utf8")).toBe("new in the layer");
  const whiteout = lstatSync(join(r.layer, "d/gone"));
  expect(whiteout.isCharacterDevice() && whiteout.rdev === 0).toBe(true);
  expect(readdirSync(r.layer).sort()).toEqual(["d"]);
  expect(lstatSync(join(r.layer, "d")).mode & 0o7777).toBe(0o750);
  expect(readlinkSync(join(r.layer, "d/link"))).toBe("new.txt");
});

it("refuses a file through a symlink the layer made: nothing outside changes, and the layer is not left half made", async () => {
  const r = await downloadLayer([
    { name: "ok.txt", type: "f", data: "ok" },
    { name: "s", type: "l", link: "../outside" },
    { name: "s/evil", type: "f", data: "through the link" },
  ]);
  expect(r.status, JSON.stringify(r.body)).toBe(400);
  expect(r.body.error.code).toBe("path_outside_root");
  expect(readdirSync(r.outside)).toEqual(["sentinel"]);
  expect(readFileSync(join(r.outside, "sentinel"), "utf8")).toBe("sentinel");
  expect(readdirSync(r.layer)).toEqual([]);
});
