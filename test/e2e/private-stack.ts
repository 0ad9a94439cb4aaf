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
  const stack = await startStack({ port: await freePort(), privateDir: dir, log: () => {} });
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
