// Bad input and wrong tokens are refused with a 4xx that names the field, and nothing is started or written.
import { env } from "cloudflare:workers";
import { introspectWorkflow } from "cloudflare:test";
import { expect, it } from "vitest";
import { api } from "./helpers.ts";

it.each([
  ["a body that is not JSON", "{nope", 400, "body"],
  ["a missing sandboxId", { path: "/workspace" }, 400, "sandboxId"],
  ["a bad sandboxId", { sandboxId: "Not Valid!", path: "/workspace" }, 400, "sandboxId"],
  ["an unknown strategy", { sandboxId: "s1", strategy: "rsync-magic" }, 400, "strategy"],
  ["a path with '..'", { sandboxId: "s1", path: "/workspace/../etc" }, 400, "path"],
  ["a path outside the allowed roots", { sandboxId: "s1", path: "/etc" }, 400, "path"],
  ["a relative path", { sandboxId: "s1", path: "workspace" }, 400, "path"],
  ["an unknown field", { sandboxId: "s1", colour: "blue" }, 400, "body"],
])("POST /api/backups with %s → %i naming %s", async (_what, body, status, field) => {
  await using wf = await introspectWorkflow(env.BACKUP_WORKFLOW);
  const r = await api("POST", "/api/backups", body);
  expect(r.status).toBe(status);
  expect(r.json.error.field).toBe(field);
  expect(r.json.error.message).toMatch(field === "body" ? /./ : new RegExp(field));
  expect(await wf.get()).toHaveLength(0);
});

it("restoring a snapshot that does not exist is a 404 naming snapshotId, and starts nothing", async () => {
  await using wf = await introspectWorkflow(env.RESTORE_WORKFLOW);
  const r = await api("POST", "/api/restores", { snapshotId: "bk-20260101000000-00000000", sandboxId: "s1" });
  expect(r.status).toBe(404);
  expect(r.json.error.field).toBe("snapshotId");
  expect(await wf.get()).toHaveLength(0);
});

it("a restore strategy that does not fit is refused", async () => {
  const r = await api("POST", "/api/restores", { snapshotId: "not-an-id", sandboxId: "s1" });
  expect(r.status).toBe(400);
  expect(r.json.error.field).toBe("snapshotId");
});

it.each([
  ["no token", ""],
  ["a wrong token", "wrong"],
])("%s is a 401", async (_what, token) => {
  const r = await api("GET", "/api/snapshots", undefined, token);
  expect(r.status).toBe(401);
  expect(r.json.error.field).toBe("authorization");
});

it("unknown routes and methods say what exists", async () => {
  expect((await api("GET", "/api/nope")).status).toBe(404);
  const r = await api("DELETE", "/api/backups");
  expect(r.status).toBe(405);
  expect(r.json.error.message).toMatch(/POST/);
});

it("GET /api/strategies lists every preset with its format and tools", async () => {
  const r = await api("GET", "/api/strategies");
  expect(r.status).toBe(200);
  const names = r.json.strategies.map((s: any) => s.name);
  expect(names).toEqual(expect.arrayContaining(["tar-zst-direct", "tar-zst-pipe", "restore-tar-zst", "restore-tar-zst-pipe"]));
  for (const s of r.json.strategies) expect(s.requires.length).toBeGreaterThan(0);
});
