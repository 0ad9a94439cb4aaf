// Bad input and wrong tokens are refused with a 4xx that names the field, and nothing is started or written.
import { env } from "cloudflare:workers";
import { introspectWorkflow } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { apiErrorLine } from "../../scripts/cli/api-error-line.ts";
import { writeProgress } from "../../src/snapshots/records.ts";
import { api, freshSandbox, putFile, runWorkflow } from "./helpers.ts";

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
  expect(r.json.error.code).toBe("bad_request");
  expect(r.json.error.field).toBe(field);
  expect(r.json.error.message).toMatch(field === "body" ? /./ : new RegExp(field));
  expect(await wf.get()).toHaveLength(0);
});

describe("a backup of nothing is refused at the request, naming what was mistyped (issue 22)", () => {
  it("a sandbox id never used: 404 naming sandboxId, with the sandbox and the path, and nothing started", async () => {
    await using wf = await introspectWorkflow(env.BACKUP_WORKFLOW);
    const typo = freshSandbox("never-used");
    for (const path of ["/workspace/app", "/workspace"]) {
      const r = await api("POST", "/api/backups", { sandboxId: typo, path });
      expect(r.status, JSON.stringify(r.json)).toBe(404);
      expect(r.json.error).toMatchObject({ code: "not_found", field: "sandboxId" });
      expect(r.json.error.message).toContain(`sandbox ${typo}`);
      expect(r.json.error.message).toContain(path);
    }
    // The CLI names its own flag.
    const r = await api("POST", "/api/backups", { sandboxId: typo, path: "/workspace/app" });
    expect(apiErrorLine("backup", r.json.error)).toMatch(/^snapflow backup: --sandbox: sandbox never-used-\S+ has nothing under \/workspace/);
    expect(await wf.get()).toHaveLength(0);
  });

  it("a path with no directory in a sandbox that has files: 404 naming path, with the sandbox and the path, and nothing started", async () => {
    await using wf = await introspectWorkflow(env.BACKUP_WORKFLOW);
    const sb = freshSandbox("used");
    await putFile(sb, "/workspace/app/a.txt", "a file\n");
    for (const [path, why] of [["/workspace/ap", "nothing is there"], ["/workspace/app/a.txt", "it is a file"]] as const) {
      const r = await api("POST", "/api/backups", { sandboxId: sb, path });
      expect(r.status, JSON.stringify(r.json)).toBe(404);
      expect(r.json.error).toMatchObject({ code: "not_found", field: "path" });
      expect(r.json.error.message).toBe(`path: ${path} in sandbox ${sb} is not a directory to back up: ${why}`);
    }
    expect(await wf.get()).toHaveLength(0);
  });

  it("the directory itself is still backed up (the refusal released the path's lease)", async () => {
    const sb = freshSandbox("used");
    await putFile(sb, "/workspace/app/a.txt", "a file\n");
    expect((await api("POST", "/api/backups", { sandboxId: sb, path: "/workspace/ap" })).status).toBe(404);
    const b = await runWorkflow("backup", { sandboxId: sb, path: "/workspace/app", strategy: "tar-zst-pipe" });
    expect(b.steps.archive).toBeDefined();
    expect((await api("GET", `/api/snapshots/${b.snapshotId}`)).json).toMatchObject({ manifest: { files: 1 } });
  });
});

it("restoring a snapshot that does not exist is a 404 naming snapshotId, and starts nothing", async () => {
  await using wf = await introspectWorkflow(env.RESTORE_WORKFLOW);
  const r = await api("POST", "/api/restores", { snapshotId: "bk-20260101000000-00000000", sandboxId: "s1" });
  expect(r.status).toBe(404);
  expect(r.json.error.code).toBe("not_found");
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
  expect(r.json.error.code).toBe("unauthorized");
  expect(r.json.error.field).toBe("authorization");
});

it("unknown routes and methods say what exists", async () => {
  expect((await api("GET", "/api/nope")).json.error).toMatchObject({ code: "not_found" });
  const r = await api("DELETE", "/api/backups");
  expect(r.status).toBe(405);
  expect(r.json.error.code).toBe("method_not_allowed");
  expect(r.json.error.message).toMatch(/POST/);
});

it("GET /api/strategies lists every preset with its format and tools", async () => {
  const r = await api("GET", "/api/strategies");
  expect(r.status).toBe(200);
  const names = r.json.strategies.map((s: any) => s.name);
  expect(names).toEqual(expect.arrayContaining(["tar-zst-direct", "tar-zst-pipe", "restore-tar-zst", "restore-tar-zst-pipe"]));
  // Every strategy says what it needs of the sandbox: tools, or (a kernel mount) capabilities.
  for (const s of r.json.strategies) expect(s.requires.length + (s.needs?.length ?? 0), s.name).toBeGreaterThan(0);
});

it("GET /api/strategies?sandboxId= probes that sandbox and says what can run there", async () => {
  const r = await api("GET", "/api/strategies?sandboxId=probe-me");
  expect(r.status).toBe(200);
  expect(r.json.probe.cpus).toBeGreaterThan(0);
  const pipe = r.json.strategies.find((s: any) => s.name === "tar-zst-pipe");
  expect(pipe).toMatchObject({ available: true });
  expect((await api("GET", "/api/strategies?sandboxId=Bad!")).json.error.field).toBe("sandboxId");
});

it("a strategy is unavailable, with every reason, when tools or capabilities are missing", async () => {
  const { unavailableReason } = await import("../../src/strategies/registry.ts");
  const strategy = { name: "x", kind: "restore", description: "", format: { kind: "tar", compression: "zstd" }, path: "push-file", requires: ["tar", "zstd"], needs: ["fuse", "cap_sys_admin", "fs:erofs"] } as const;
  const probe = { tools: { tar: { path: "/bin/tar", version: "1" }, zstd: null }, fuse: false, capSysAdmin: false, filesystems: ["squashfs"] };
  expect(unavailableReason(strategy as any, probe as any)).toBe("missing tool: zstd; no /dev/fuse; no CAP_SYS_ADMIN (kernel mounts need it); the kernel has no erofs filesystem");
  expect(unavailableReason(strategy as any, { tools: { tar: {}, zstd: {} }, fuse: true, capSysAdmin: true, filesystems: ["erofs"] } as any)).toBeUndefined();
});

it("an agent's refusal reaches the caller with its field, as bad_request", async () => {
  // The agent refuses a dataset path that leads out of the sandbox through a symlink only it can see.
  const sandbox = `api-agent-${Date.now().toString(36)}`;
  const { agent } = await import("./helpers.ts");
  await agent(sandbox, "POST", "/v1/datasets", { path: "/workspace/real", kind: "tricky", seed: 1 });
  const r = await api("POST", `/api/sandboxes/${sandbox}/datasets`, { path: "/workspace/real/absolute-link/x", kind: "tricky" });
  expect(r.status).toBe(400);
  expect(r.json.error).toMatchObject({ code: "bad_request", field: "path" });
});

describe("GET /api/backups/:id?wait= holds the answer until something changes (a long poll)", () => {
  it("answers when a step more has ended, and at the end; a bad wait is a 400 naming wait", async () => {
    const sb = freshSandbox("wait");
    await putFile(sb, "/workspace/app/a.txt", "waited for\n");
    await using wf = await introspectWorkflow(env.BACKUP_WORKFLOW);
    const started = await api("POST", "/api/backups", { sandboxId: sb, path: "/workspace/app" });
    expect(started.status).toBe(202);
    const seen: number[] = [];
    let last: any;
    for (let i = 0; i < 20; i++) {
      last = (await api("GET", `/api/backups/${started.json.id}?wait=30`)).json;
      seen.push(Object.keys(last.steps).length);
      if (["complete", "errored"].includes(last.status)) break;
    }
    expect(last.status).toBe("complete");
    // Each held answer came back when it had something new: never the same count of steps twice before the end.
    expect(seen.slice(0, -1).every((n, i) => i === 0 || n > seen[i - 1]!)).toBe(true);
    expect(seen.length).toBeLessThanOrEqual(7);
    await (await wf.get())[0]!.waitForStatus("complete");
    // Ended: answered at once, however long it may wait.
    const t = Date.now();
    expect((await api("GET", `/api/backups/${started.json.id}?wait=30`)).json.status).toBe("complete");
    expect(Date.now() - t).toBeLessThan(5000);
    for (const bad of ["-1", "31", "soon"]) {
      const r = await api("GET", `/api/backups/${started.json.id}?wait=${bad}`);
      expect(r.status, bad).toBe(400);
      expect(r.json.error.field).toBe("wait");
    }
    const badUntil = await api("GET", `/api/backups/${started.json.id}?wait=1&until=later`);
    expect(badUntil.status).toBe(400);
    expect(badUntil.json.error.field).toBe("until");
  });

  it("a waiting request is answered from a progress record that says complete, totals and all, whatever its Workflow still does", async () => {
    // Its outcome is final once that record says so (the Workflow writes it after the snapshot's record and the
    // lease): what the Workflow does afterwards (start a content check) must not hold a waiting client. Here the
    // instance has ended otherwise (an unknown strategy, before it wrote anything), so only the record can say complete.
    const id = `bk-20261127000000-${crypto.randomUUID().slice(0, 8)}`;
    const instance = await env.BACKUP_WORKFLOW.create({ id, params: { snapshotId: id, sandboxId: "nobody", path: "/workspace", strategy: "no-such-strategy" } });
    for (let i = 0; i < 200 && (await instance.status()).status !== "errored"; i++) await new Promise((r) => setTimeout(r, 50));
    expect((await instance.status()).status).toBe("errored");
    const t = 1_795_000_000_000;
    const steps = { probe: { ms: 10, startedAt: t, endedAt: t + 10 }, transfer: { ms: 30, startedAt: t + 15, endedAt: t + 45 }, record: { ms: 5, startedAt: t + 50, endedAt: t + 55 } };
    await writeProgress(env.INDEX, { id, kind: "backup", status: "complete", strategy: "tar-zst-presigned-multipart", startedAt: new Date(t).toISOString(), steps, snapshotId: id });
    for (const query of ["?wait=5&until=end", "?wait=5"]) {
      const r = await api("GET", `/api/backups/${id}${query}`);
      expect(r.json, query).toMatchObject({ id, status: "complete", snapshotId: id, steps, totalMs: 45, wallMs: 55, overheadMs: 10 });
    }
    // A plain GET asks the instance (what a poll costs stays what it costs during a run: the peers race prices it so).
    expect((await api("GET", `/api/backups/${id}`)).json.status).toBe("errored");
    // A record still running is not taken on its word: the instance's ending is.
    await writeProgress(env.INDEX, { id, kind: "backup", status: "running", strategy: "tar-zst-presigned-multipart", startedAt: new Date(t).toISOString(), steps: {}, snapshotId: id });
    expect((await api("GET", `/api/backups/${id}`)).json.status).toBe("errored");
  });

  it("with until=end, answers only when the run has ended", async () => {
    const sb = freshSandbox("wait-end");
    await putFile(sb, "/workspace/app/a.txt", "waited for the end\n");
    const started = await api("POST", "/api/backups", { sandboxId: sb, path: "/workspace/app" });
    expect(started.status).toBe(202);
    let answers = 0;
    let last: any;
    do {
      last = (await api("GET", `/api/backups/${started.json.id}?wait=30&until=end`)).json;
      answers++;
    } while (last.status === "running" && answers < 10);
    expect(last.status).toBe("complete");
    // One held request saw the whole run (a second only if it outlasted 30 s), however many steps it took.
    expect(answers).toBe(1);
    expect(Object.keys(last.steps).length).toBeGreaterThanOrEqual(4);
  });
});
