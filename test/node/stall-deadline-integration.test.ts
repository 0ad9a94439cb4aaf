// The agent's deadline on a silent store (container/transfer/stall-deadline.ts), against a real HTTP server that stops
// sending: a silent body or a response that never starts fails with a message naming the stall; a slow but moving
// body does not.
import { createServer, type Server } from "node:http";
import { pipeline } from "node:stream/promises";
import { Writable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fetchWithStallDeadline } from "../../container/transfer/stall-deadline.ts";

let server: Server;
let base: string;
beforeAll(async () => {
  server = createServer((req, res) => {
    if (req.url === "/silent-body") {
      res.writeHead(200);
      res.write("first bytes, then nothing");
      return; // never ends
    }
    if (req.url === "/no-response") return; // never answers
    if (req.url === "/slow") {
      res.writeHead(200);
      let n = 0;
      const t = setInterval(() => (++n < 6 ? res.write("x") : (clearInterval(t), res.end())), 100);
      return;
    }
    res.writeHead(404).end();
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const a = server.address();
  base = `http://127.0.0.1:${typeof a === "object" && a ? a.port : 0}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

const drain = (body: NodeJS.ReadableStream) => pipeline(body, new Writable({ write: (_c, _e, done) => done() }));

describe("fetchWithStallDeadline", () => {
  it("a body that stops flowing fails after the limit, naming the stall", async () => {
    const { body } = await fetchWithStallDeadline(new URL(`${base}/silent-body`), "presigned GET /bucket/key", 300);
    await expect(drain(body!)).rejects.toThrow("presigned GET /bucket/key: the store sent nothing for 0.3 s (stalled); aborted");
  });

  it("a response that never starts fails after the limit, naming the stall", async () => {
    await expect(fetchWithStallDeadline(new URL(`${base}/no-response`), "presigned GET /bucket/key", 300)).rejects.toThrow(/sent nothing for 0.3 s \(stalled\)/);
  });

  it("a slow body that keeps moving is not cut (silence, not total time)", async () => {
    const { body } = await fetchWithStallDeadline(new URL(`${base}/slow`), "slow", 300);
    await drain(body!);
  });
});
