// npm run dev: start the whole local stack, keep it running, stop it cleanly on Ctrl-C or SIGTERM. The agent and
// the object store are supervised: one that dies is started again on its port (at most 5 times a minute; then
// everything stops, saying which part and why). wrangler dev dying stops everything: its Workflows, Queues and KV
// are the stack's memory, and restarting it is what `npm run dev` again does. Local cron triggers do not fire by
// themselves, so the watchdog for interrupted runs is fired here every five minutes (as the deployed cron does);
// the stack fires it once itself when it comes up.
import { WATCHDOG_CRON } from "../src/snapshots/lifecycle-schedule.ts";
import { agentRuntimeFrom } from "./stack/agent-runtime.ts";
import { findRunningStack, startStack, wranglerPort } from "./stack/stack.ts";

if (process.argv.includes("--help") || process.argv.includes("-h")) {
  console.log(`Usage: npm run dev [-- --port 8787]

Starts the embedded local stack and keeps it running until Ctrl-C:
  - a local S3 server (SeaweedFS) standing in for R2's S3 endpoint
  - the snapflow agent as a host process (one root directory per sandbox id, under .snapflow/stack/sandboxes)
  - wrangler dev (the Worker, Workflows, Queues, KV), configured through .snapflow/dev.vars
The API token and URLs are written to .snapflow/stack.json; logs go to .snapflow/logs/.
A dead agent or object store is restarted (at most 5 times a minute); runs a stopped stack left in flight are
resumed, or failed with their cleanup done, when it starts again (the same secrets: .snapflow/stack/stack-secrets.json).
SNAPFLOW_AGENT_RUNTIME=bun runs the agent as production does: bundled by Bun (the Dockerfile's bun build), under Bun.`);
  process.exit(0);
}
const portArg = process.argv.indexOf("--port");
const port = portArg > 0 ? Number(process.argv[portArg + 1]) : 8787;

const running = await findRunningStack();
if (running) {
  console.error(`A stack is already running at ${running.apiUrl} (pid ${running.pid}); stop it first.`);
  process.exit(1);
}
let agentRuntime: ReturnType<typeof agentRuntimeFrom>;
try {
  agentRuntime = agentRuntimeFrom(process.env.SNAPFLOW_AGENT_RUNTIME);
} catch (e) {
  console.error(`snapflow dev: ${(e as Error).message}`);
  process.exit(2);
}
const stack = await startStack({ port, supervise: { maxRestarts: 5, windowMs: 60_000 }, agentRuntime }).catch((e: Error) => {
  console.error(`snapflow dev: could not start the stack: ${e.message}`);
  process.exit(1);
});
console.log(`snapflow local stack is up:
  API        ${stack.apiUrl}   (token in .snapflow/stack.json)
  agent      ${stack.agentUrl}
  S3 store   ${stack.s3Endpoint}
Follow a run:  npx snapflow status ID --follow   (npx snapflow --help for the rest)
Inspect runs:  npx wrangler workflows instances list snapflow-backup --local${wranglerPort(stack.apiUrl)}
Ctrl-C stops everything.`);

let stopping = false;
const stop = async (why: string, code: number) => {
  if (stopping) return;
  stopping = true;
  console.error(`snapflow dev: ${why}; stopping...`);
  await stack.stop();
  process.exit(code);
};
const watchdog = setInterval(() => {
  void fetch(`${stack.apiUrl}/cdn-cgi/handler/scheduled?cron=${encodeURIComponent(WATCHDOG_CRON)}`)
    .then((r) => r.body?.cancel())
    .catch((e: Error) => console.error(`snapflow dev: the watchdog did not run (${e.message})`));
}, 5 * 60_000);
watchdog.unref();
process.on("SIGINT", () => void stop("interrupted", 0));
process.on("SIGTERM", () => void stop("terminated", 0));
// The terminal closed: stop as for Ctrl-C. Writing to the closed terminal then fails (EIO); that must not end the
// stop half-way.
process.on("SIGHUP", () => {
  for (const out of [process.stdout, process.stderr]) out.on("error", () => {});
  void stop("its terminal closed", 0);
});
void stack.died.then((why) => stop(`${why}\n(logs in .snapflow/logs/)`, 1));
