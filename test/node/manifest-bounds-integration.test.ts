// nothing-bounds-a-manifest (issue 21): a sandbox chooses its manifest's size, and a restoring agent reads it. The
// agent never reads more than SNAPFLOW_MAX_MANIFEST_BYTES of one, whether the store states a length or streams it,
// and stops reading at the bound: a 561 MB manifest once grew the agent from 155 MB to 1.8 GB. (The Worker's refusal
// at backup is test/workers/compromised-agent-integration.test.ts.)
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { agentManifestByteLimit, loadManifest } from "../../container/manifest/manifest-file.ts";
import { DEFAULT_MAX_MANIFEST_BYTES } from "../../container/contract/manifest-limits.ts";

const LIMIT = 1 << 20;
let server: Server;
let base: string;
let dir: string;
/** bytes the server managed to send of each answer before the agent hung up */
const sent: Record<string, number> = {};

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "manifest-bounds-"));
  server = createServer((req, res) => {
    const stated = req.url === "/stated";
    const total = 64 * LIMIT;
    res.writeHead(200, stated ? { "content-length": String(total) } : {});
    sent[req.url!] = 0;
    const block = Buffer.alloc(64 * 1024, 0x20);
    const pump = () => {
      while (sent[req.url!]! < total) {
        sent[req.url!]! += block.length;
        if (!res.write(block)) return void res.once("drain", pump);
      }
      res.end();
    };
    res.on("close", () => {});
    pump();
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  process.env.SNAPFLOW_MAX_MANIFEST_BYTES = String(LIMIT);
});
afterEach(() => {
  process.env.SNAPFLOW_MAX_MANIFEST_BYTES = String(LIMIT);
});
afterAll(async () => {
  delete process.env.SNAPFLOW_MAX_MANIFEST_BYTES;
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
  rmSync(dir, { recursive: true, force: true });
});

describe("nothing-bounds-a-manifest: the agent reads at most SNAPFLOW_MAX_MANIFEST_BYTES of a stored manifest", () => {
  it("a stated length over the bound is refused before the body is read", async () => {
    await expect(loadManifest({ url: `${base}/stated` }, "expected")).rejects.toMatchObject({ code: "bad_request", field: "expected", message: expect.stringMatching(/67108864 bytes, more than this agent reads \(1048576: SNAPFLOW_MAX_MANIFEST_BYTES\)/) });
  });

  it("a streamed body is cut off once it passes the bound: the agent does not read the rest", async () => {
    await expect(loadManifest({ url: `${base}/streamed` }, "expected")).rejects.toMatchObject({ code: "bad_request", message: expect.stringMatching(/over 1048576 bytes/) });
    // The server wrote what the socket buffers took before the agent hung up, far from the 64 MiB it offered.
    await new Promise((r) => setTimeout(r, 100));
    expect(sent["/streamed"]!).toBeLessThan(16 * LIMIT);
  });

  it("a manifest file in the sandbox over the bound is refused by its size", async () => {
    const file = join(dir, "big.json");
    writeFileSync(file, " ".repeat(LIMIT + 1));
    await expect(loadManifest({ file }, "expected")).rejects.toMatchObject({ field: "expected.file", message: expect.stringMatching(/1048577 bytes/) });
  });

  it("the bound is the setting, or 128 MiB", () => {
    expect(agentManifestByteLimit({ SNAPFLOW_MAX_MANIFEST_BYTES: "5000" })).toBe(5000);
    expect(agentManifestByteLimit({})).toBe(DEFAULT_MAX_MANIFEST_BYTES);
    expect(agentManifestByteLimit({ SNAPFLOW_MAX_MANIFEST_BYTES: "lots" })).toBe(128 * 2 ** 20);
  });
});
