// Two test projects:
// - "workers": tests that run inside workerd (the Workers test pool) with the real bindings from wrangler.jsonc
//   (local R2, KV, Workflows, Queues), reaching a real host agent and a real S3 server that
//   test/global-setup.ts starts for the run.
// - "workers-kv-limit": the same, with KV refusing a second write to a key within a second, as Cloudflare's does
//   (a test-only binding switches on src/testing/kv-write-limit.ts; miniflare's KV has no such limit).
// - "node": the agent's own modules and the repo's files, in Node 22 against real tools.
// - "e2e": a private local stack and the results page in headless Chromium.
import { cloudflareTest } from "@cloudflare/vitest-plugin";
import { defineConfig } from "vitest/config";
import type { TestStack } from "./test/global-setup.ts";

/** A project running in workerd with the real bindings from wrangler.jsonc and the stack global-setup.ts starts. */
function workersProject(name: string, include: string[], extraBindings: Record<string, string> = {}) {
  return {
    plugins: [
      cloudflareTest(({ inject }) => {
        const stack = inject<TestStack>("stack");
        return {
          wrangler: { configPath: "./wrangler.jsonc" },
          miniflare: {
            bindings: {
              SANDBOX_TRANSPORT: "local",
              OBJECT_STORE: "s3",
              AGENT_URL: stack.agentUrl,
              AGENT_SECRET: stack.agentSecret,
              API_TOKEN: stack.apiToken,
              S3_ENDPOINT: stack.s3.endpoint,
              S3_BUCKET: stack.s3.bucket,
              S3_REGION: "auto",
              S3_ACCESS_KEY_ID: stack.s3.accessKeyId,
              S3_SECRET_ACCESS_KEY: stack.s3.secretAccessKey,
              // tests only: the sandbox whose root is a small tmpfs (test/global-setup.ts), as JSON
              TEST_SMALL_DISK: JSON.stringify(stack.smallDisk),
              TEST_FAULT_PROXY: stack.faultProxyUrl,
              TEST_AGENT_FAULT_PROXY: stack.agentFaultProxyUrl,
              // what runs the agent ("node" or "bun", SNAPFLOW_AGENT_RUNTIME): test/workers/agent-runtime-integration.test.ts
              TEST_AGENT_RUNTIME: stack.agentRuntime,
              // The Worker's deadlines on the agent (src/sandbox/agent-deadlines.ts), shortened so that the
              // deadline tests run in seconds: 8 s of silence on a streamed call, 15 s for a short call.
              AGENT_IDLE_SECONDS: "8",
              AGENT_CALL_SECONDS: "15",
              // A lazy restore signs only the first chunk and the image's last 1 MiB before the mount, so that the
              // tests' small images take the path big ones take: most URLs delivered after the tree is usable.
              LAZY_HEAD_CHUNKS: "1",
              LAZY_TAIL_BYTES: String(1024 * 1024),
              // Every step retry's wait at a fifth of production's (workflows/step-config.ts): a fault test whose run
              // fails after all its retries waits ~10 s instead of ~50 s; the retries themselves are production's.
              STEP_RETRY_DELAY_FACTOR: "0.2",
              // No background content check after each image backup (src/restore/background-check.ts): the suites'
              // many image backups would each start a restore beside the tests. background-check-integration asks
              // for it per backup.
              IMAGE_CONTENT_CHECK: "off",
              ...extraBindings,
            },
          },
        };
      }),
    ],
    test: {
      name,
      include,
      globalSetup: ["./test/global-setup.ts"],
      testTimeout: 120_000,
      hookTimeout: 120_000,
    },
  };
}

export default defineConfig({
  test: {
    projects: [
      workersProject("workers", ["test/workers/**/*.test.ts"]),
      // tests only: KV refuses a second write to a key within 1 s (src/testing/kv-write-limit.ts)
      workersProject("workers-kv-limit", ["test/workers-kv-limit/**/*.test.ts"], { TEST_KV_ONE_WRITE_PER_SECOND: "true" }),
      {
        test: {
          name: "e2e",
          include: ["test/e2e/**/*.test.ts"],
          environment: "node",
          testTimeout: 240_000,
          hookTimeout: 180_000,
        },
      },
      {
        test: {
          name: "node",
          include: ["test/node/**/*.test.ts"],
          environment: "node",
          testTimeout: 60_000,
          // snapflow-lazy is built into the repository (native/lazy/build.sh at npm install), not installed: every
          // extraction's merge and a delta's removals run it, as the agent finds it on PATH.
          env: { PATH: `${new URL("native/lazy/bin", import.meta.url).pathname}:${process.env.PATH ?? ""}` },
        },
      },
    ],
  },
});
