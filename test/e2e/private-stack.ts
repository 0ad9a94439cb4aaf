// A private local stack for one e2e file: its own state directory and port, an API client on it; stop() stops the
// stack and removes the directory.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { apiClient } from "../../scripts/cli/api-client.ts";
import { freePort, startStack, type Stack } from "../../scripts/stack/stack.ts";

export interface PrivateStack {
  stack: Stack;
  dir: string;
  api: ReturnType<typeof apiClient>;
  stop(): Promise<void>;
}

export async function startPrivateStack(prefix: string): Promise<PrivateStack> {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  // Step retries wait a fifth of production's, as in the workers projects (vitest.config.ts): a run that fails
  // after its retries ends in seconds.
  const stack = await startStack({ port: await freePort(), privateDir: dir, log: () => {}, workerVars: { STEP_RETRY_DELAY_FACTOR: "0.2" } });
  return {
    stack,
    dir,
    api: apiClient(stack.apiUrl, stack.apiToken),
    async stop() {
      await stack.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
