// One conformance suite for the SandboxTransport contract (src/sandbox/transport.ts), run in workerd against every
// implementation that can run here:
//   - local: localTransport over loopback to the real host agent that test/global-setup.ts starts (one root
//     directory per sandbox id). Runs.
//   - sandbox: sdkTransport (@cloudflare/sandbox: startProcess, containerFetch, readFile into a Cloudflare
//     container). Cannot run here: there is no Docker to build the image and no Cloudflare account to run the
//     container, and a stand-in for the Sandbox SDK would test the stand-in. Its row is skipped with that reason
//     and only type-checked; the table is keyed by the transport kinds, so a new kind cannot be forgotten.
// The contract: agentFetch reaches the agent of the sandbox named (token and sandbox header added), raw bytes
// travel unchanged both ways, streamed bodies arrive whole, agent errors come back as responses (not exceptions);
// the two SDK-style reads return the file's bytes and refuse a missing file; destroy ends the sandbox and may be
// repeated; after the agent process dies, the next call (a replayable one) reaches a running agent again — for
// sandbox the transport restarts it itself, for local the harness restarts the host agent (test/global-setup.ts's
// /__agent/kill) and the transport, which keeps no state about it, simply reaches the new one.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { localTransport } from "../../src/sandbox/local-transport.ts";
import { sdkTransport } from "../../src/sandbox/sdk-transport.ts";
import type { SandboxTransport } from "../../src/sandbox/transport.ts";
import { getSandbox } from "@cloudflare/sandbox";
import { firstDifference, freshSandbox, killAgent, sha256Hex } from "./helpers.ts";

const MiB = 2 ** 20;

interface Implementation {
  make: () => SandboxTransport;
  /** SIGKILLs the agent that serves `sandboxId` (local: the host agent, which the harness starts again) */
  killAgent: (sandboxId: string) => Promise<void>;
  /** why this implementation cannot run here; the suite is then skipped and says so */
  skip?: string;
}

const TRANSPORTS: Record<SandboxTransport["kind"], Implementation> = {
  local: { make: () => localTransport(env.AGENT_URL, env.AGENT_SECRET), killAgent: () => killAgent() },
  sandbox: {
    make: () => sdkTransport(env.SANDBOX as never, env.AGENT_SECRET, Number(env.AGENT_PORT), env.S3_ENDPOINT),
    killAgent: (sandboxId) => getSandbox(env.SANDBOX as never, sandboxId).killProcess("snapflow-agent", "SIGKILL"),
    skip: "needs Docker and a Cloudflare account (a real Sandbox container); type-checked only here",
  },
};

/** Every byte value, then random bytes: an encoding slip (text, base64, a lost byte) cannot hide in it. */
function testBytes(size: number): Uint8Array {
  const out = new Uint8Array(size);
  for (let i = 0; i < 256 && i < size; i++) out[i] = i;
  for (let i = 256; i < size; i += 65_536) crypto.getRandomValues(out.subarray(i, Math.min(size, i + 65_536)));
  return out;
}


function fromBase64(text: string): Uint8Array {
  return Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
}

async function putFile(t: SandboxTransport, sandbox: string, path: string, body: BodyInit): Promise<{ status: number; json: any }> {
  const r = await t.agentFetch(sandbox, `/v1/files?path=${encodeURIComponent(path)}`, { method: "PUT", body, duplex: "half" } as RequestInit);
  return { status: r.status, json: await r.json() };
}

async function stat(t: SandboxTransport, sandbox: string, path: string): Promise<any> {
  const r = await t.agentFetch(sandbox, `/v1/stat?path=${encodeURIComponent(path)}`);
  expect(r.status).toBe(200);
  return r.json();
}

function conformance(kind: SandboxTransport["kind"], { make, killAgent: kill }: Implementation) {
  it("says which implementation it is", () => {
    expect(make().kind).toBe(kind);
  });

  describe("agentFetch", () => {
    it("reaches the agent with its token: an authenticated route answers", async () => {
      const t = make();
      const sb = freshSandbox("transport-auth");
      const health = await t.agentFetch(sb, "/v1/health");
      expect(await health.json()).toEqual({ ok: true });
      expect(await stat(t, sb, "/workspace")).toMatchObject({ exists: true, type: "dir" });
    });

    it("carries raw bytes both ways unchanged, with their length", async () => {
      const t = make();
      const sb = freshSandbox("transport-bytes");
      const data = testBytes(2 * MiB + 3);
      const put = await putFile(t, sb, "/workspace/data.bin", data);
      expect(put.status, JSON.stringify(put.json)).toBe(200);
      expect(put.json).toMatchObject({ bytes: data.byteLength, sha256: await sha256Hex(data) });

      const r = await t.agentFetch(sb, "/v1/files?path=/workspace/data.bin");
      expect(r.status).toBe(200);
      expect(r.headers.get("content-length")).toBe(String(data.byteLength));
      expect(firstDifference(new Uint8Array(await r.arrayBuffer()), data)).toBe(-1);
    });

    it("sends a streamed request body of unknown length whole", async () => {
      const t = make();
      const sb = freshSandbox("transport-stream-in");
      const data = testBytes(MiB + 17);
      let offset = 0;
      const body = new ReadableStream<Uint8Array>({
        pull(c) {
          if (offset >= data.byteLength) return c.close();
          c.enqueue(data.slice(offset, offset + 100_000));
          offset += 100_000;
        },
      });
      const put = await putFile(t, sb, "/workspace/streamed.bin", body);
      expect(put.status, JSON.stringify(put.json)).toBe(200);
      expect(put.json).toMatchObject({ bytes: data.byteLength, sha256: await sha256Hex(data) });
    });

    it("returns a streamed response (no Content-Length) whole", async () => {
      const t = make();
      const sb = freshSandbox("transport-stream-out");
      expect((await putFile(t, sb, "/workspace/tree/a.txt", "alpha")).status).toBe(200);
      const r = await t.agentFetch(sb, "/v1/archive?path=/workspace/tree&kind=tar&compression=none");
      expect(r.status).toBe(200);
      expect(r.headers.get("content-length")).toBeNull();
      const tar = new Uint8Array(await r.arrayBuffer());
      expect(tar.byteLength % 512, "a tar is whole 512-byte blocks").toBe(0);
      expect(new TextDecoder().decode(tar)).toContain("alpha");
    });

    it("talks to the sandbox named: another sandbox id does not see its files", async () => {
      const t = make();
      const a = freshSandbox("transport-a");
      const b = freshSandbox("transport-b");
      expect((await putFile(t, a, "/workspace/only-in-a.txt", "a")).status).toBe(200);
      expect(await stat(t, a, "/workspace/only-in-a.txt")).toMatchObject({ exists: true, type: "file" });
      expect(await stat(t, b, "/workspace/only-in-a.txt")).toEqual({ exists: false });
    });

    it("hands the agent's errors back as responses with their code and field, not as exceptions", async () => {
      const t = make();
      const sb = freshSandbox("transport-errors");
      const missing = await t.agentFetch(sb, "/v1/files?path=/workspace/missing.bin");
      expect(missing.status).toBe(404);
      expect(await missing.json()).toMatchObject({ error: { code: "not_found", field: "path" } });
      const outside = await t.agentFetch(sb, "/v1/files?path=/etc/passwd");
      expect(outside.status).toBe(400);
      expect(await outside.json()).toMatchObject({ error: { code: "path_outside_root", field: "path" } });
    });
  });

  describe("SDK-style file reads", () => {
    it("readFileBase64 answers the file's bytes as base64", async () => {
      const t = make();
      const sb = freshSandbox("transport-b64");
      const data = testBytes(300_001);
      expect((await putFile(t, sb, "/workspace/b64.bin", data)).status).toBe(200);
      expect(firstDifference(fromBase64(await t.readFileBase64(sb, "/workspace/b64.bin")), data)).toBe(-1);
    });

    it("readFileStreamBase64 answers the file's bytes over many events", async () => {
      const t = make();
      const sb = freshSandbox("transport-sse");
      const data = testBytes(MiB + 5); // several 64 KiB events and a short last one
      expect((await putFile(t, sb, "/workspace/sse.bin", data)).status).toBe(200);
      const stream = await t.readFileStreamBase64(sb, "/workspace/sse.bin");
      expect(firstDifference(new Uint8Array(await new Response(stream).arrayBuffer()), data)).toBe(-1);
    });

    it("both refuse a missing file", async () => {
      const t = make();
      const sb = freshSandbox("transport-missing");
      await expect(t.readFileBase64(sb, "/workspace/none.bin")).rejects.toThrow();
      await expect(t.readFileStreamBase64(sb, "/workspace/none.bin")).rejects.toThrow();
    });
  });

  describe("a dead agent", () => {
    it("after the agent process is killed, the next call answers (the agent started again), and the sandbox's files are there", async () => {
      const t = make();
      const sb = freshSandbox("transport-restart");
      expect((await putFile(t, sb, "/workspace/kept.txt", "kept")).status).toBe(200);
      await kill(sb);
      expect(await stat(t, sb, "/workspace/kept.txt")).toMatchObject({ exists: true, type: "file", size: 4 });
      const health = await t.agentFetch(sb, "/v1/health");
      expect(await health.json()).toEqual({ ok: true });
    });
  });

  describe("destroy", () => {
    it("ends the sandbox: its files are gone, and destroying again is fine", async () => {
      const t = make();
      const sb = freshSandbox("transport-destroy");
      expect((await putFile(t, sb, "/workspace/doomed.txt", "x")).status).toBe(200);
      await t.destroy(sb);
      expect(await stat(t, sb, "/workspace/doomed.txt")).toEqual({ exists: false });
      await t.destroy(sb);
      await t.destroy(freshSandbox("transport-never-used"));
    });
  });
}

for (const [kind, implementation] of Object.entries(TRANSPORTS) as [SandboxTransport["kind"], Implementation][]) {
  describe.skipIf(implementation.skip !== undefined)(`SandboxTransport: ${kind}${implementation.skip ? ` — SKIPPED: ${implementation.skip}` : ""}`, () => {
    conformance(kind, implementation);
  });
}
