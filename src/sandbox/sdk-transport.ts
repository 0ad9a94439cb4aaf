// Production: sandboxes are Cloudflare Sandbox containers (@cloudflare/sandbox). The image's entrypoint is the
// SDK's control server (port 3000); the agent is started from here with startProcess so that it receives the
// sandbox's own token (HMAC of AGENT_SECRET and the sandbox id: container/contract/agent-token.ts; the secret never enters a
// sandbox), and reached with containerFetch on AGENT_PORT.
//
// A dead agent is started again: when containerFetch says nothing answers on the port (it throws, or answers a
// 500/502/503 of the container platform's own — "the container is not listening", "connection refused", "Container
// suddenly disconnected" — rather than our agent's {error} JSON), the cached start is dropped, the process is
// looked up again (a process that still claims to run but does not answer is killed), started, waited for, and the
// request is sent once more if its body can be sent again (none, or not a stream). A streamed body cannot be
// replayed: the platform's answer is handed back and the step's retry sends it anew.
// Verified here: types only (npm run typecheck). Not verified: the SDK's actual error texts and process states
// after an agent crash, which need a real container (Docker, a Cloudflare account); the texts matched are those in
// @cloudflare/containers' and @cloudflare/sandbox's sources as installed.
import { getSandbox, streamFile, type Sandbox } from "@cloudflare/sandbox";
import { agentTokenFor } from "../../container/contract/agent-token.ts";
import { SANDBOX_HEADER } from "../../container/contract/protocol.ts";
import { configuredRoots } from "../../container/contract/sandbox-roots.ts";
import type { AgentDeadlines } from "./agent-deadlines.ts";
import type { SandboxTransport } from "./transport.ts";
import { SnapflowError } from "../errors.ts";

const AGENT_PROCESS = "snapflow-agent";

/** What the container platform says when nothing listens on the agent's port (from the SDK's sources). */
const NOTHING_LISTENING = /not listening|connection refused|suddenly disconnected|error proxying request to container|container port not found|network connection lost/i;

/** A thrown containerFetch error that says the agent's port does not answer. */
const isAgentGoneError = (e: unknown) => e instanceof Error && NOTHING_LISTENING.test(e.message);

/**
 * Whether an answer is the platform's "nothing listens" rather than our agent's (whose errors are {"error": …}
 * JSON). Reads only small error answers; gives back an equivalent Response for the caller either way.
 */
async function agentGoneAnswer(r: Response): Promise<{ gone: boolean; response: Response }> {
  if (r.status !== 500 && r.status !== 502 && r.status !== 503) return { gone: false, response: r };
  const text = await r.text();
  const fromAgent = /^\s*\{\s*"error"\s*:/.test(text);
  return { gone: !fromAgent && NOTHING_LISTENING.test(text), response: new Response(text, { status: r.status, statusText: r.statusText, headers: r.headers }) };
}
const AGENT_COMMAND = "bun /opt/snapflow/agent.js";

async function waitHealthy(sandbox: ReturnType<typeof getSandbox>, port: number, sandboxId: string, token: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const r = await sandbox.containerFetch(new Request("http://agent/v1/health", { headers: { authorization: `Bearer ${token}`, [SANDBOX_HEADER]: sandboxId } }), port).catch(() => null);
    await r?.body?.cancel();
    if (r?.status === 200) return;
    if (Date.now() > deadline) throw new SnapflowError("agent_error", `the agent in sandbox ${sandboxId} did not become healthy on port ${port} (last answer: ${r?.status ?? "none"})`);
    await new Promise((ok) => setTimeout(ok, 250));
  }
}

export function sdkTransport(ns: DurableObjectNamespace<Sandbox>, secret: string, port: number, storeEndpoint: string, deadlines?: AgentDeadlines): SandboxTransport {
  const started = new Map<string, Promise<void>>();
  /** sandboxes whose agent stopped answering: the next ensureAgent does not trust a "running" process */
  const restarting = new Set<string>();

  const ensureAgent = (sandboxId: string) => {
    let p = started.get(sandboxId);
    if (!p) {
      p = (async () => {
        const sandbox = getSandbox(ns, sandboxId);
        const token = await agentTokenFor(secret, sandboxId);
        let existing = await sandbox.getProcess(AGENT_PROCESS).catch(() => null);
        if (existing?.status === "running" && restarting.has(sandboxId)) {
          // It claims to run but its port did not answer: end it, so that a fresh one can take the port.
          await sandbox.killProcess(AGENT_PROCESS, "SIGKILL").catch(() => {});
          existing = null;
        }
        restarting.delete(sandboxId);
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
    const send = () => getSandbox(ns, sandboxId).containerFetch(new Request(`http://agent${path}`, { ...init, headers }), port);
    const replayable = !(init.body instanceof ReadableStream);
    const forget = () => {
      started.delete(sandboxId);
      restarting.add(sandboxId);
    };
    try {
      const { gone, response } = await agentGoneAnswer(await send());
      if (!gone) return response;
      forget();
      if (!replayable) return response;
    } catch (e) {
      if (!isAgentGoneError(e)) throw e;
      forget();
      if (!replayable) throw e;
    }
    // Once: a second failure is the caller's (its deadline, the step's retry).
    await ensureAgent(sandboxId);
    return send();
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
    // Not verified here (no SDK container): typed against @cloudflare/sandbox's own declarations only.
    async sdkBackup(sandboxId, options) {
      const handle = await getSandbox(ns, sandboxId).createBackup(options);
      return { id: handle.id, dir: handle.dir };
    },
    // Not verified here either: typed against @cloudflare/sandbox's declarations (restoreBackup).
    async sdkRestore(sandboxId, backup) {
      const r = await getSandbox(ns, sandboxId).restoreBackup(backup);
      if (!r.success) throw new Error(`the SDK's restoreBackup of ${backup.id} into ${backup.dir} did not succeed`);
    },
  } satisfies SandboxTransport;
}
