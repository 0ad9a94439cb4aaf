// Production: sandboxes are Cloudflare Sandbox containers (@cloudflare/sandbox). The image's entrypoint is the
// SDK's control server (port 3000); the agent is started from here with startProcess so that it receives the
// sandbox's own token (HMAC of AGENT_SECRET and the sandbox id: container/agent-token.ts; the secret never enters a
// sandbox), and reached with containerFetch on AGENT_PORT.
import { getSandbox, streamFile, type Sandbox } from "@cloudflare/sandbox";
import { agentTokenFor } from "../../container/agent-token.ts";
import { SANDBOX_HEADER } from "../../container/protocol.ts";
import { configuredRoots } from "../../container/sandbox-roots.ts";
import type { AgentDeadlines } from "./agent-deadlines.ts";
import type { SandboxTransport } from "./transport.ts";

const AGENT_PROCESS = "snapflow-agent";
const AGENT_COMMAND = "bun /opt/snapflow/agent.js";

async function waitHealthy(sandbox: ReturnType<typeof getSandbox>, port: number, sandboxId: string, token: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const r = await sandbox.containerFetch(new Request("http://agent/v1/health", { headers: { authorization: `Bearer ${token}`, [SANDBOX_HEADER]: sandboxId } }), port).catch(() => null);
    await r?.body?.cancel();
    if (r?.status === 200) return;
    if (Date.now() > deadline) throw new Error(`the agent in sandbox ${sandboxId} did not become healthy on port ${port} (last answer: ${r?.status ?? "none"})`);
    await new Promise((ok) => setTimeout(ok, 250));
  }
}

export function sdkTransport(ns: DurableObjectNamespace<Sandbox>, secret: string, port: number, storeEndpoint: string, deadlines?: AgentDeadlines): SandboxTransport {
  const started = new Map<string, Promise<void>>();

  const ensureAgent = (sandboxId: string) => {
    let p = started.get(sandboxId);
    if (!p) {
      p = (async () => {
        const sandbox = getSandbox(ns, sandboxId);
        const token = await agentTokenFor(secret, sandboxId);
        const existing = await sandbox.getProcess(AGENT_PROCESS).catch(() => null);
        const proc = existing?.status === "running"
          ? existing
          : await sandbox.startProcess(AGENT_COMMAND, {
              processId: AGENT_PROCESS,
              env: { SNAPFLOW_AGENT_TOKEN: token, SNAPFLOW_AGENT_PORT: String(port), SNAPFLOW_AGENT_STORE_ORIGIN: storeEndpoint, SNAPFLOW_SANDBOX_ROOTS: configuredRoots().join(",") },
            });
        // Readiness is authenticated: the SDK's HTTP check cannot send a header, so wait for the port, then ask
        // /v1/health with this sandbox's token until the agent answers 200.
        await proc.waitForPort(port, { mode: "tcp", timeout: 30_000 });
        await waitHealthy(sandbox, port, sandboxId, token);
      })();
      p.catch(() => started.delete(sandboxId));
      started.set(sandboxId, p);
    }
    return p;
  };

  const agentFetch = async (sandboxId: string, path: string, init: RequestInit = {}) => {
    await ensureAgent(sandboxId);
    const headers = new Headers(init.headers);
    headers.set("authorization", `Bearer ${await agentTokenFor(secret, sandboxId)}`);
    headers.set(SANDBOX_HEADER, sandboxId);
    return getSandbox(ns, sandboxId).containerFetch(new Request(`http://agent${path}`, { ...init, headers }), port);
  };

  return {
    kind: "sandbox",
    deadlines,
    agentFetch,
    async readFileBase64(sandboxId, path) {
      const file = await getSandbox(ns, sandboxId).readFile(path, { encoding: "base64" });
      return file.content;
    },
    async readFileStreamBase64(sandboxId, path) {
      const events = await getSandbox(ns, sandboxId).readFileStream(path);
      const chunks = streamFile(events);
      // streamFile decodes the SDK's base64 events into bytes for binary files.
      return new ReadableStream<Uint8Array>({
        async pull(c) {
          const { done, value } = await chunks.next();
          if (done) c.close();
          else c.enqueue(typeof value === "string" ? new TextEncoder().encode(value) : value);
        },
      });
    },
    async destroy(sandboxId) {
      started.delete(sandboxId);
      await getSandbox(ns, sandboxId).destroy();
    },
  } satisfies SandboxTransport;
}
