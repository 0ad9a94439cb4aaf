// npm run dev: start the whole local stack, keep it running, stop it cleanly on Ctrl-C or SIGTERM.
import { findRunningStack, startStack } from "./lib/stack.ts";

if (process.argv.includes("--help") || process.argv.includes("-h")) {
  console.log(`Usage: npm run dev [-- --port 8787]

Starts the embedded local stack and keeps it running until Ctrl-C:
  - a local S3 server (SeaweedFS) standing in for R2's S3 endpoint
  - the snapflow agent as a host process (one root directory per sandbox id, under .snapflow/stack/sandboxes)
  - wrangler dev (the Worker, Workflows, Queues, KV), configured through .snapflow/dev.vars
The API token and URLs are written to .snapflow/stack.json; logs go to .snapflow/logs/.`);
  process.exit(0);
}
const portArg = process.argv.indexOf("--port");
const port = portArg > 0 ? Number(process.argv[portArg + 1]) : 8787;

const running = await findRunningStack();
if (running) {
  console.error(`A stack is already running at ${running.apiUrl} (pid ${running.pid}); stop it first.`);
  process.exit(1);
}
const stack = await startStack({ port }).catch((e: Error) => {
  console.error(`snapflow dev: could not start the stack: ${e.message}`);
  process.exit(1);
});
console.log(`snapflow local stack is up:
  API        ${stack.apiUrl}   (token in .snapflow/stack.json)
  agent      ${stack.agentUrl}
  S3 store   ${stack.s3Endpoint}
Inspect runs:  npx wrangler workflows instances list snapflow-backup --local
Ctrl-C stops everything.`);

let stopping = false;
const stop = async (why: string, code: number) => {
  if (stopping) return;
  stopping = true;
  console.error(`snapflow dev: ${why}; stopping...`);
  await stack.stop();
  process.exit(code);
};
process.on("SIGINT", () => void stop("interrupted", 0));
process.on("SIGTERM", () => void stop("terminated", 0));
void stack.died.then((what) => stop(`${what} exited unexpectedly (see .snapflow/logs/)`, 1));
