// The Worker's deadlines on the agent (src/sandbox/agent-deadlines.ts, deadline-fetch.ts), against the real agent
// behind the fault proxy that the Worker reaches it through (test/fault-proxy.ts): a short call whose answer stalls
// fails at its bound; a stream that goes silent fails at the silence bound and releases both bodies (the source we
// fed it is cancelled, nothing is left reading); a consumer that is slow is not the agent's silence; a refused
// connection is named. Each error is AgentCallError with a stable code, naming the call, the sandbox and the bound.
// The bounds are the client's own here (1.5 s), shorter than the test stack's, so the file runs in seconds.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { AgentCallError, AgentClient } from "../../src/sandbox/agent-client.ts";
import { localTransport } from "../../src/sandbox/local-transport.ts";
import { isPermanent } from "../../src/errors.ts";
import { agent, armAgentFault, firedAgentFaults, freshSandbox } from "./helpers.ts";

const deadlines = { callMs: 1500, idleMs: 1500, longMs: 60_000 };
const client = (sandbox: string) => new AgentClient(localTransport(env.AGENT_URL, env.AGENT_SECRET), sandbox, deadlines);

async function failure(p: Promise<unknown>): Promise<{ error: AgentCallError; ms: number }> {
  const t = Date.now();
  const error = await p.then(() => null, (e: unknown) => e);
  expect(error).toBeInstanceOf(AgentCallError);
  return { error: error as AgentCallError, ms: Date.now() - t };
}

/** An incompressible tree of about `mb` MB. */
async function tree(mb: number, seed: number): Promise<string> {
  const sb = freshSandbox("deadline");
  await agent(sb, "POST", "/v1/datasets", { path: "/workspace/app", kind: "added-data", seed, files: 10, bytes: 100_000, addedBytes: mb * 1e6 });
  return sb;
}

describe("a short call has a fixed bound", () => {
  it("a probe whose answer stalls fails at the bound with agent_timeout, naming the call, the sandbox and the bound; transient", async () => {
    const sb = freshSandbox("deadline");
    await armAgentFault(sb, { method: "GET", match: "/v1/probe", action: "stall", afterBytes: 0, ms: 20_000 });
    const { error, ms } = await failure(client(sb).probe());
    expect(error.code).toBe("agent_timeout");
    expect(error.message).toMatch(new RegExp(`^probe: the agent in sandbox ${sb} did not finish within 1.5 s \\(AGENT_CALL_SECONDS\\)`));
    expect(isPermanent(error)).toBe(false);
    expect(ms).toBeGreaterThanOrEqual(1400);
    expect(ms).toBeLessThan(10_000);
    expect(await firedAgentFaults(sb, "/v1/probe")).toHaveLength(1);
    // The agent itself is fine: the next call answers.
    expect((await client(sb).probe()).kernel).toBeTruthy();
  });

  it("an extract whose connection is refused cancels the body it was given (no reader left on its source)", async () => {
    const sb = freshSandbox("deadline");
    await armAgentFault(sb, { method: "PUT", match: "/v1/extract", action: "refuse" });
    let cancelled: unknown;
    const body = new ReadableStream<Uint8Array>({
      pull(c) {
        c.enqueue(new Uint8Array(64 * 1024));
      },
      cancel(reason) {
        cancelled = reason ?? "cancelled";
      },
    }, { highWaterMark: 0 });
    const { error } = await failure(client(sb).extractStream({ path: "/workspace/app", kind: "tar", compression: "none" }, body));
    expect(error.code).toBe("agent_unreachable");
    // Cancelled with workerd's "Network connection lost" or, failing that, our own error: either way released.
    expect(cancelled).toBeDefined();
  });

  it("a refused connection is agent_unreachable, naming the call and the sandbox; transient", async () => {
    const sb = freshSandbox("deadline");
    await armAgentFault(sb, { match: "/v1/stat", action: "refuse" });
    const { error } = await failure(client(sb).stat("/workspace"));
    expect(error.code).toBe("agent_unreachable");
    expect(error.message).toContain(`stat: the connection to the agent in sandbox ${sb} failed`);
    expect(isPermanent(error)).toBe(false);
  });
});

describe("a streamed call has a bound on the agent's silence", () => {
  it("an archive stream that goes silent half-way errors its reader with agent_timeout at the silence bound", async () => {
    const sb = await tree(4, 81);
    await armAgentFault(sb, { method: "GET", match: "/v1/archive", action: "stall", afterBytes: 500_000, ms: 20_000 });
    const r = await client(sb).archiveStream({ path: "/workspace/app", kind: "tar", compression: "zstd", level: 1 });
    let got = 0;
    const { error, ms } = await failure((async () => {
      for await (const chunk of r.body!) got += chunk.byteLength;
    })());
    expect(error.code).toBe("agent_timeout");
    expect(error.message).toBe(`archive: the agent in sandbox ${sb} sent or took nothing for 1.5 s (AGENT_IDLE_SECONDS); aborted`);
    expect(got).toBeGreaterThan(0);
    expect(got).toBeLessThanOrEqual(500_000);
    expect(ms).toBeLessThan(10_000);
  });

  it("a consumer slower than the silence bound is not the agent's silence: the stream arrives whole", async () => {
    const sb = await tree(2, 82);
    const r = await client(sb).archiveStream({ path: "/workspace/app", kind: "tar", compression: "zstd", level: 1 });
    let got = 0;
    let reads = 0;
    for await (const chunk of r.body!) {
      got += chunk.byteLength;
      // Twice, a pause longer than the bound while the agent has bytes ready.
      if (reads++ < 2) await new Promise((ok) => setTimeout(ok, 2500));
    }
    expect(got).toBeGreaterThan(1_000_000);
    // The wrapper hands the answer on in 256 KiB blocks (its silence counted per block), not per ~4 KB chunk.
    expect(reads).toBeLessThanOrEqual(Math.ceil(got / (64 * 1024)));
  });

  it("an extract whose connection stops taking bytes fails at the bound, and the body we fed it is cancelled (no reader left)", async () => {
    const sb = freshSandbox("deadline");
    // The proxy holds the request body after 1 MB; once the buffers between are full, the agent takes nothing more.
    await armAgentFault(sb, { method: "PUT", match: "/v1/extract", action: "stall", afterBytes: 1_000_000, ms: 20_000 });
    let sent = 0;
    let cancelled: unknown;
    const chunk = new Uint8Array(64 * 1024);
    const body = new ReadableStream<Uint8Array>({
      pull(c) {
        // endless: only the deadline can end this call
        crypto.getRandomValues(chunk.subarray(0, 65_536));
        sent += chunk.byteLength;
        c.enqueue(chunk.slice());
      },
      cancel(reason) {
        cancelled = reason ?? "cancelled";
      },
    }, { highWaterMark: 0 });
    const { error, ms } = await failure(client(sb).extractStream({ path: "/workspace/app", kind: "tar", compression: "none" }, body));
    expect(error.code).toBe("agent_timeout");
    expect(error.message).toContain(`extract: the agent in sandbox ${sb} sent or took nothing for 1.5 s`);
    expect(ms).toBeLessThan(20_000);
    expect(cancelled).toBeInstanceOf(AgentCallError);
    // Nothing pulls from it any more.
    const after = sent;
    await new Promise((ok) => setTimeout(ok, 500));
    expect(sent).toBe(after);
  });
});

describe("an answer of known size (a file read) is bounded as a whole, not per chunk", () => {
  async function staged(sb: string, bytes: Uint8Array) {
    await client(sb).writeFile("/workspace/staged.bin", new Response(bytes).body!);
  }
  const sha = async (b: ArrayBuffer | Uint8Array) => [...new Uint8Array(await crypto.subtle.digest("SHA-256", b))].map((x) => x.toString(16).padStart(2, "0")).join("");

  it("arrives whole, with its length known to whoever stores it", async () => {
    const sb = freshSandbox("deadline");
    const bytes = new Uint8Array(3_000_000);
    for (let i = 0; i < bytes.length; i += 65_536) crypto.getRandomValues(bytes.subarray(i, i + 65_536));
    await staged(sb, bytes);
    const r = await client(sb).readFile("/workspace/staged.bin");
    expect(r.headers.get("content-length")).toBe("3000000");
    expect(await sha(await r.arrayBuffer())).toBe(await sha(bytes));
  });

  it("a body that stalls half-way errors its reader at the silence bound plus its size at 1 MB/s", async () => {
    const sb = freshSandbox("deadline");
    await staged(sb, new Uint8Array(2_000_000).fill(7));
    await armAgentFault(sb, { method: "GET", match: "/v1/files", action: "stall", afterBytes: 500_000, ms: 20_000 });
    const r = await client(sb).readFile("/workspace/staged.bin");
    let got = 0;
    const t = Date.now();
    const error = await (async () => {
      for await (const chunk of r.body!) got += chunk.byteLength;
    })().then(() => null, (e: unknown) => e);
    const ms = Date.now() - t;
    // The error crossed a native stream: its fields survive, its class does not (a plain Error, transient).
    expect(error).toBeInstanceOf(Error);
    expect(error).toMatchObject({ code: "agent_timeout", status: 504 });
    expect((error as Error).message).toBe(`read file: the agent in sandbox ${sb} did not send its answer within 3.5 s (AGENT_IDLE_SECONDS + its size at 1 MB/s); aborted`);
    expect(got).toBeLessThanOrEqual(500_000);
    // 1.5 s + 2 MB at 1 MB/s, counted from the answer's headers; the stall itself lasts 20 s
    expect(ms).toBeGreaterThan(2_500);
    expect(ms).toBeLessThan(10_000);
  });
});
