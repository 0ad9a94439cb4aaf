// Sandbox roots as configuration, through the API and the real agent: the SDK's defaults (/workspace, /home, /app,
// /tmp, /var/tmp) back up and restore; /, /proc, /sys, /dev, paths outside the roots and '..' escapes are 400s
// naming the field before anything starts; a bad SANDBOX_ROOTS is a config_error naming the variable.
import { env } from "cloudflare:workers";
import { introspectWorkflow } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { readConfig } from "../../src/config.ts";
import { agent, api, freshSandbox, runWorkflow } from "./helpers.ts";

describe("roots", () => {
  it("backs up from /tmp and /home and restores into /app and /var/tmp, verified", async () => {
    const src = freshSandbox("roots");
    await agent(src, "POST", "/v1/datasets", { path: "/tmp/build", kind: "tricky", seed: 11 });
    await agent(src, "POST", "/v1/datasets", { path: "/home/user/project", kind: "tricky", seed: 12 });
    const fromTmp = await runWorkflow("backup", { sandboxId: src, path: "/tmp/build" });
    const fromHome = await runWorkflow("backup", { sandboxId: src, path: "/home/user/project" });
    const dst = freshSandbox("roots-dst");
    expect((await runWorkflow("restore", { snapshotId: fromTmp.snapshotId, sandboxId: dst, path: "/app" })).status).toBe("complete");
    expect((await runWorkflow("restore", { snapshotId: fromHome.snapshotId, sandboxId: dst, path: "/var/tmp/project" })).status).toBe("complete");
    const [a, b] = await Promise.all([agent(src, "POST", "/v1/manifest", { path: "/tmp/build" }), agent(dst, "POST", "/v1/manifest", { path: "/app" })]);
    expect(b.entries).toEqual(a.entries);
  });

  it.each([
    ["/"], ["/proc"], ["/proc/1/root"], ["/sys/kernel"], ["/dev"], ["/dev/shm/x"], ["/etc"], ["/var/log"], ["/tmpx"],
    ["/tmp/../etc"], ["/home/../../proc"],
  ])("POST /api/backups with path %j → 400 naming path, nothing started", async (path) => {
    await using wf = await introspectWorkflow(env.BACKUP_WORKFLOW);
    const r = await api("POST", "/api/backups", { sandboxId: "s1", path });
    expect(r.status).toBe(400);
    expect(r.json.error).toMatchObject({ code: "bad_request", field: "path" });
    expect(await wf.get()).toHaveLength(0);
  });

  it("restores and datasets are refused the same way", async () => {
    expect((await api("POST", "/api/restores", { snapshotId: "bk-20260101000000-00000000", sandboxId: "s1", path: "/proc/self" })).json.error).toMatchObject({ field: "path" });
    expect((await api("POST", "/api/sandboxes/s1/datasets", { path: "/sys", kind: "tricky" })).json.error).toMatchObject({ field: "path" });
  });

  it("a symlink in /tmp that leads out of the roots is refused by the agent, and the API passes on its field", async () => {
    const src = freshSandbox("roots-link");
    await agent(src, "POST", "/v1/datasets", { path: "/tmp/t", kind: "tricky", seed: 1 });
    // The tricky tree holds a dangling link; the agent refuses to write through it (a target outside the roots).
    const r = await api("POST", `/api/sandboxes/${src}/datasets`, { path: "/tmp/t/dangling-link/x", kind: "tricky" });
    expect(r.status).toBe(400);
    expect(r.json.error.field).toBe("path");
  });

  it.each([
    ["/,/workspace", /SANDBOX_ROOTS.*whole filesystem/],
    ["/proc", /SANDBOX_ROOTS.*\/proc/],
    ["/snapflow", /SANDBOX_ROOTS.*snapflow/],
  ])("SANDBOX_ROOTS=%j is a config_error naming the variable", (roots, message) => {
    expect(() => readConfig({ ...env, SANDBOX_ROOTS: roots })).toThrow(message);
  });
});
