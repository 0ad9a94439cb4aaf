// The embedded default: the agent runs as a host process (scripts/dev.ts starts it) and serves one root
// directory per sandbox id, chosen by the x-snapflow-sandbox header. Same agent code as in the image.
import { agentTokenFor } from "../../container/contract/agent-token.ts";
import { SANDBOX_HEADER } from "../../container/contract/protocol.ts";
import { decodeBase64Events } from "./base64-events.ts";
import type { AgentDeadlines } from "./agent-deadlines.ts";
import type { SandboxTransport } from "./transport.ts";
import { SnapflowError } from "../errors.ts";

export function localTransport(agentUrl: string, secret: string, deadlines?: AgentDeadlines): SandboxTransport {
  const base = agentUrl.replace(/\/+$/, "");
  const agentFetch = async (sandboxId: string, path: string, init: RequestInit = {}) => {
    const headers = new Headers(init.headers);
    // The host agent checks this sandbox's own token against the sandbox header (container/contract/agent-token.ts).
    headers.set("authorization", `Bearer ${await agentTokenFor(secret, sandboxId)}`);
    headers.set(SANDBOX_HEADER, sandboxId);
    return fetch(`${base}${path}`, { ...init, headers });
  };
  return {
    kind: "local",
    deadlines,
    agentFetch,
    async readFileBase64(sandboxId, path) {
      // The agent base64-encodes inside the sandbox, as the SDK's container does.
      const r = await agentFetch(sandboxId, `/v1/files?path=${encodeURIComponent(path)}&encoding=base64`);
      if (!r.ok) throw new SnapflowError("agent_error", `reading ${path}: HTTP ${r.status} ${await r.text()}`);
      return ((await r.json()) as { content: string }).content;
    },
    async readFileStreamBase64(sandboxId, path) {
      const r = await agentFetch(sandboxId, `/v1/files?path=${encodeURIComponent(path)}&encoding=base64-sse`);
      if (!r.ok) throw new SnapflowError("agent_error", `streaming ${path}: HTTP ${r.status} ${await r.text()}`);
      return decodeBase64Events(r.body!);
    },
    async destroy(sandboxId) {
      const r = await agentFetch(sandboxId, "/v1/sandbox", { method: "DELETE" });
      await r.body?.cancel();
      if (!r.ok) throw new SnapflowError("agent_error", `destroying sandbox ${sandboxId}: HTTP ${r.status}`);
    },
  } satisfies SandboxTransport;
}
