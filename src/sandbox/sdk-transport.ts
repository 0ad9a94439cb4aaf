// Production: sandboxes are Cloudflare Sandbox containers (@cloudflare/sandbox). The image's entrypoint is the
// SDK's control server (port 3000); the agent is started from here with startProcess so that it receives the
// AGENT_TOKEN secret, and reached with containerFetch on AGENT_PORT.
import { getSandbox, streamFile, type Sandbox } from "@cloudflare/sandbox";
import { SANDBOX_HEADER } from "../../container/protocol.ts";
import type { SandboxTransport } from "./transport.ts";

const AGENT_PROCESS = "snapflow-agent";
const AGENT_COMMAND = "bun /opt/snapflow/agent.js";

export function sdkTransport(ns: DurableObjectNamespace<Sandbox>, token: string, port: number): SandboxTransport {
  const started = new Map<string, Promise<void>>();

  const ensureAgent = (sandboxId: string) => {
    let p = started.get(sandboxId);
    if (!p) {
      p = (async () => {
        const sandbox = getSandbox(ns, sandboxId);
        const existing = await sandbox.getProcess(AGENT_PROCESS).catch(() => null);
        const proc = existing?.status === "running"
          ? existing
          : await sandbox.startProcess(AGENT_COMMAND, {
              processId: AGENT_PROCESS,
              env: { SNAPFLOW_AGENT_TOKEN: token, SNAPFLOW_AGENT_PORT: String(port) },
            });
        await proc.waitForPort(port, { mode: "http", path: "/v1/health", status: 200, timeout: 30_000 });
      })();
      p.catch(() => started.delete(sandboxId));
      started.set(sandboxId, p);
    }
    return p;
  };

  const agentFetch = async (sandboxId: string, path: string, init: RequestInit = {}) => {
    await ensureAgent(sandboxId);
    const headers = new Headers(init.headers);
    headers.set("authorization", `Bearer ${token}`);
    headers.set(SANDBOX_HEADER, sandboxId);
    return getSandbox(ns, sandboxId).containerFetch(new Request(`http://agent${path}`, { ...init, headers }), port);
  };

  return {
    kind: "sandbox",
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
