// Runs a local S3-compatible object store (SeaweedFS) until SIGINT/SIGTERM.
//   node scripts/object-store.ts --dir D --bucket B [--port P]
// stdout: one JSON line {endpoint,bucket,accessKeyId,secretAccessKey,pid}; progress goes to stderr.

import { parseArgs } from "node:util";
import { startObjectStore } from "./lib/object-store-server.ts";

const { values } = parseArgs({
  options: { dir: { type: "string" }, bucket: { type: "string" }, port: { type: "string" } },
});
if (!values.dir || !values.bucket) {
  console.error("usage: node scripts/object-store.ts --dir D --bucket B [--port P]");
  process.exit(2);
}

const log = (line: string) => console.error(line);
const server = await startObjectStore({
  dir: values.dir,
  bucket: values.bucket,
  port: values.port ? Number(values.port) : undefined,
  log,
});
const { endpoint, bucket, accessKeyId, secretAccessKey, pid } = server;
console.log(JSON.stringify({ endpoint, bucket, accessKeyId, secretAccessKey, pid }));

let stopping = false;
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, async () => {
    if (stopping) return;
    stopping = true;
    await server.stop();
    process.exit(0);
  });
}
// If weed dies on its own, say so and fail rather than sit there serving nothing.
server.exited.then((code) => {
  if (stopping) return;
  log(`object store: weed exited unexpectedly (code ${code}); see ${values.dir}/weed.log`);
  process.exit(1);
});
