// The agent these tests talk to runs under the runtime the run asked for: `npm run test:bun` (SNAPFLOW_AGENT_RUNTIME=bun)
// must exercise the Bun-built bundle production runs, not fall back to Node on the source without saying so.
import { env } from "cloudflare:workers";
import { expect, it } from "vitest";
import { agent, freshSandbox, runWorkflow } from "./helpers.ts";

it("the agent runs under the runtime the run asked for, and a backup records it", async () => {
  const src = freshSandbox("runtime");
  const probed = await agent(src, "GET", "/v1/probe");
  expect(probed.runtime).toMatch(env.TEST_AGENT_RUNTIME === "bun" ? /^bun \d+\.\d+\.\d+$/ : /^node v22\./);
  await agent(src, "POST", "/v1/datasets", { path: "/workspace/app", kind: "tricky", seed: 3 });
  const b = await runWorkflow("backup", { sandboxId: src, path: "/workspace/app", strategy: "tar-zst-pipe" });
  expect(b.steps.probe.runtime).toBe(probed.runtime);
});
