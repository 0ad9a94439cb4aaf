// The embedded default: the agent runs as a host process (scripts/dev.ts starts it) and serves one root
// directory per sandbox id, chosen by the x-snapflow-sandbox header. Same agent code as in the image.
import { SANDBOX_HEADER } from "../../container/protocol.ts";
import type { SandboxTransport } from "./transport.ts";

export function localTransport(agentUrl: string, token: string): SandboxTransport {
  const base = agentUrl.replace(/\/+$/, "");
  const agentFetch = (sandboxId: string, path: string, init: RequestInit = {}) => {
    const headers = new Headers(init.headers);
    headers.set("authorization", `Bearer ${token}`);
    headers.set(SANDBOX_HEADER, sandboxId);
    return fetch(`${base}${path}`, { ...init, headers });
  };
  return {
    kind: "local",
    agentFetch,
    async readFileBase64(sandboxId, path) {
      const r = await agentFetch(sandboxId, `/v1/files?path=${encodeURIComponent(path)}`);
      if (!r.ok) throw new Error(`reading ${path}: HTTP ${r.status} ${await r.text()}`);
      // The SDK base64-encodes file content inside the container; do the same work here so the baseline
      // measures the same encode/decode cost.
      const bytes = new Uint8Array(await r.arrayBuffer());
      let binary = "";
      for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
      return btoa(binary);
    },
    async destroy(sandboxId) {
      const r = await agentFetch(sandboxId, "/v1/sandbox", { method: "DELETE" });
      await r.body?.cancel();
      if (!r.ok) throw new Error(`destroying sandbox ${sandboxId}: HTTP ${r.status}`);
    },
  } satisfies SandboxTransport;
}
