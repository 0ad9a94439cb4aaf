// The snapflow agent: entry point. Runs inside the sandbox image (under Bun or Node) and, for the embedded local
// stack, as a host process serving one root directory per sandbox id. Configuration is by environment:
//   SNAPFLOW_AGENT_TOKEN         shared secret; every request but /v1/health must carry it (required)
//   SNAPFLOW_AGENT_PORT          port to listen on (default 8080)
//   SNAPFLOW_AGENT_HOST          address to bind (default 0.0.0.0 in the image; the local stack uses 127.0.0.1)
//   SNAPFLOW_AGENT_SANDBOXES_DIR host mode: the directory holding one root per sandbox id
//   SNAPFLOW_AGENT_FAULTS=1      enable test-only fault injection
import { createAgentServer } from "./server.ts";

const token = process.env.SNAPFLOW_AGENT_TOKEN;
if (!token) {
  console.error("snapflow agent: SNAPFLOW_AGENT_TOKEN is required");
  process.exit(2);
}
const port = Number(process.env.SNAPFLOW_AGENT_PORT ?? 8080);
const host = process.env.SNAPFLOW_AGENT_HOST ?? "0.0.0.0";
const server = createAgentServer({
  token,
  sandboxesDir: process.env.SNAPFLOW_AGENT_SANDBOXES_DIR || undefined,
  faults: process.env.SNAPFLOW_AGENT_FAULTS === "1",
});
server.listen(port, host, () => {
  const address = server.address();
  const actual = typeof address === "object" && address ? address.port : port;
  // One machine-readable line, so the process that started us learns the port when it asked for port 0.
  console.log(JSON.stringify({ agent: "listening", host, port: actual }));
});
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => {
    server.close(() => process.exit(0));
    server.closeAllConnections();
  });
}
