// The snapflow agent: entry point. Runs inside the sandbox image (under Bun or Node) and, for the embedded local
// stack, as a host process serving one root directory per sandbox id. Configuration is by environment:
//   SNAPFLOW_AGENT_TOKEN         in a sandbox: this sandbox's own token (agent-token.ts); every request carries it
//   SNAPFLOW_AGENT_SECRET        host mode instead: the Worker's AGENT_SECRET, to check each sandbox's derived token
//   SNAPFLOW_AGENT_PORT          port to listen on (default 8080)
//   SNAPFLOW_AGENT_HOST          address to bind (default 0.0.0.0 in the image; the local stack uses 127.0.0.1)
//   SNAPFLOW_AGENT_STORE_ORIGIN  the object store's endpoint: the only origin the agent fetches (required)
//   SNAPFLOW_AGENT_SANDBOXES_DIR host mode: the directory holding one root per sandbox id
//   SNAPFLOW_SANDBOX_ROOTS       comma-separated roots callers may name (default /workspace,/home,/app,/tmp,/var/tmp;
//                                the Worker's SANDBOX_ROOTS, passed when it starts the agent)
//   SNAPFLOW_AGENT_FAULTS=1      enable test-only fault injection
//   SNAPFLOW_AGENT_STORE_IDLE_SECONDS  a GET from the store silent this long is aborted as stalled (default 60):
//                                stall-deadline.ts
//   SNAPFLOW_AGENT_SWEEP_HOURS   sweep what dead runs left that is older than this, at start and hourly (default
//                                12, longer than any run; 0 turns the sweeper off): sweep.ts
//   SNAPFLOW_TOOL_VERSIONS       the tools' versions asked at the image's build (default /opt/snapflow/tool-versions.json;
//                                absent on a host: the first probe asks them): system/probe.ts
import { createAgentServer } from "./http/server.ts";
import { parseRoots, useSandboxRoots } from "./contract/sandbox-roots.ts";
import { weakSecretReason } from "./contract/secret-strength.ts";
import { storeOriginOf } from "./http/store-origin.ts";
import { sweepDeadMounts } from "./mounts/dead-mounts.ts";
import { SWEEP_EVERY_MS, SWEEP_OLDER_THAN_MS } from "./system/sweep.ts";
import { seedToolVersions, TOOL_VERSIONS_FILE } from "./system/probe.ts";

const token = process.env.SNAPFLOW_AGENT_TOKEN;
const secret = process.env.SNAPFLOW_AGENT_SECRET;
const hostMode = Boolean(process.env.SNAPFLOW_AGENT_SANDBOXES_DIR);
if (hostMode ? !secret : !token) {
  console.error(`snapflow agent: ${hostMode ? "SNAPFLOW_AGENT_SECRET (host mode)" : "SNAPFLOW_AGENT_TOKEN"} is required`);
  process.exit(2);
}
// A guessable secret (host mode) or token would open every sandbox, or this one, to anyone who guesses it. A
// token is the Worker's HMAC: 64 hex characters, always strong, so this refuses only one made by hand.
const weak = weakSecretReason(hostMode ? "SNAPFLOW_AGENT_SECRET" : "SNAPFLOW_AGENT_TOKEN", (hostMode ? secret : token)!);
if (weak) {
  console.error(`snapflow agent: ${weak}`);
  process.exit(2);
}
// Read once, then out of our environment: child processes (tar, curl, ...) do not inherit it.
delete process.env.SNAPFLOW_AGENT_TOKEN;
delete process.env.SNAPFLOW_AGENT_SECRET;
let storeOrigins: string[];
try {
  storeOrigins = (process.env.SNAPFLOW_AGENT_STORE_ORIGIN ?? "").split(",").map((o) => storeOriginOf(o.trim(), "SNAPFLOW_AGENT_STORE_ORIGIN"));
} catch (e) {
  console.error(`snapflow agent: ${(e as Error).message} (set it to the object store's endpoint)`);
  process.exit(2);
}
const roots = parseRoots(process.env.SNAPFLOW_SANDBOX_ROOTS);
if (!roots.ok) {
  console.error(`snapflow agent: SNAPFLOW_SANDBOX_ROOTS: ${roots.reason}`);
  process.exit(2);
}
useSandboxRoots(roots.roots);
const port = Number(process.env.SNAPFLOW_AGENT_PORT ?? 8080);
const sweepHours = Number(process.env.SNAPFLOW_AGENT_SWEEP_HOURS ?? SWEEP_OLDER_THAN_MS / 3600_000);
const host = process.env.SNAPFLOW_AGENT_HOST ?? "0.0.0.0";
const server = createAgentServer({
  auth: hostMode ? { secret: secret! } : { token: token! },
  storeOrigins,
  sandboxesDir: process.env.SNAPFLOW_AGENT_SANDBOXES_DIR || undefined,
  faults: process.env.SNAPFLOW_AGENT_FAULTS === "1",
  ...(sweepHours > 0 ? { sweep: { olderThanMs: sweepHours * 3600_000, everyMs: SWEEP_EVERY_MS } } : {}),
});
// The image's tools were asked their versions at build: the first probe (a wake's first step) spawns none of them.
await seedToolVersions(process.env.SNAPFLOW_TOOL_VERSIONS || TOOL_VERSIONS_FILE);
// Before the first request: mounts a killed predecessor left dead (its lazy helpers died with it) would block a
// retried restore from mounting at their mount points (dead-mounts.ts).
const detached = await sweepDeadMounts([process.env.SNAPFLOW_AGENT_SANDBOXES_DIR || "/"]).catch((e: Error) => [`failed: ${e.message}`]);
if (detached.length) console.log(JSON.stringify({ agent: "detached dead mounts", mounts: detached }));
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
