// Every (full) backup preset in the registry, then every restore preset that reads its format, on the tricky tree:
// the Workflow's verify step and an independent manifest comparison must both find the trees equal.
import { describe, expect, it } from "vitest";
import { restoresFor, STRATEGIES, type BackupStrategy } from "../../src/strategies/registry.ts";
import { agent, api, freshSandbox, runWorkflow as run } from "./helpers.ts";

// Deltas need a base snapshot: test/workers/delta-integration.test.ts covers them.
const backups = STRATEGIES.filter((s): s is BackupStrategy => s.kind === "backup" && !s.delta);

/** What this machine's sandboxes can run, as the API reports it (the same check the Workflows' probe step makes). */
async function availability(): Promise<Map<string, string | undefined>> {
  const r = await api("GET", "/api/strategies?sandboxId=availability");
  return new Map(r.json.strategies.map((s: any) => [s.name, s.available ? undefined : s.reason]));
}

describe.each(backups.map((b) => [b.name, b] as const))("%s", (_name, b) => {
  it(`round-trips the tricky tree through ${restoresFor(b.format).map((r) => r.name).join(" and ")}`, async () => {
    const unavailable = await availability();
    const src = freshSandbox("src");
    await agent(src, "POST", "/v1/datasets", { path: "/workspace/app", kind: "tricky", seed: 11 });
    const source = await agent(src, "POST", "/v1/manifest", { path: "/workspace/app" });
    if (unavailable.get(b.name)) {
      // Not faked: the backup must fail in its probe step with the reason.
      await expect(run("backup", { sandboxId: src, path: "/workspace/app", strategy: b.name })).rejects.toThrow(unavailable.get(b.name)!);
      return;
    }
    const backup = await run("backup", { sandboxId: src, path: "/workspace/app", strategy: b.name });
    expect(backup.status).toBe("complete");
    const restores = restoresFor(b.format);
    expect(restores.length).toBeGreaterThan(0);
    for (const r of restores) {
      const dst = freshSandbox("dst");
      const body = { snapshotId: backup.snapshotId, sandboxId: dst, path: "/workspace/app", strategy: r.name };
      if (unavailable.get(r.name)) {
        await expect(run("restore", body)).rejects.toThrow(unavailable.get(r.name)!);
        continue;
      }
      const restored = await run("restore", body);
      expect(restored.status, `${r.name}: ${restored.error}`).toBe("complete");
      expect((await agent(dst, "POST", "/v1/manifest", { path: "/workspace/app" })).entries).toEqual(source.entries);
      // Unmounts what a mount restore left, then drops the sandbox's root.
      await agent(dst, "DELETE", "/v1/sandbox");
    }
  });
});
