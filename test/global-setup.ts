// Starts the real parts the Worker tests talk to: a local S3 server (SeaweedFS) and the snapflow agent as a host
// process with test-only fault injection on. Their addresses and the tokens reach the Workers pool through
// vitest's provide/inject, and from there the Worker's bindings (vitest.config.ts).
import { randomBytes } from "node:crypto";
import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import type { TestProject } from "vitest/node";
import { startObjectStore } from "../scripts/lib/object-store-server.ts";
import { startAgent, STATE } from "../scripts/lib/stack.ts";

export interface TestStack {
  agentUrl: string;
  agentSecret: string;
  apiToken: string;
  s3: { endpoint: string; bucket: string; accessKeyId: string; secretAccessKey: string };
}

declare module "vitest" {
  export interface ProvidedContext {
    stack: TestStack;
  }
}

export default async function setup(project: TestProject) {
  const dir = join(STATE, `test-${process.pid}`);
  mkdirSync(dir, { recursive: true });
  const store = await startObjectStore({ dir: join(dir, "s3"), bucket: "snapflow-test", log: () => {} });
  const agentSecret = randomBytes(32).toString("hex");
  const agent = await startAgent({ secret: agentSecret, storeEndpoint: store.endpoint, sandboxesDir: join(dir, "sandboxes"), logFile: join(dir, "agent.log"), faults: true });
  project.provide("stack", {
    agentUrl: agent.url,
    agentSecret,
    apiToken: randomBytes(32).toString("hex"),
    s3: { endpoint: store.endpoint, bucket: store.bucket, accessKeyId: store.accessKeyId, secretAccessKey: store.secretAccessKey },
  });
  return async () => {
    await agent.process.stop();
    await store.stop();
    rmSync(dir, { recursive: true, force: true });
  };
}
