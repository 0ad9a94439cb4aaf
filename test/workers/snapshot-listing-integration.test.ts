// Names, labels and listing: backups made through the API (real agent, real S3 server) carry their name and labels
// into the store's record and the KV summary; GET /api/snapshots filters by sandbox, path, label and time and pages
// with a cursor; bad names, labels, ttls and query parameters are 400s naming the field.
import { env } from "cloudflare:workers";
import { introspectWorkflow } from "cloudflare:test";
import { beforeAll, describe, expect, it } from "vitest";
import { agent, api, freshSandbox, runWorkflow } from "./helpers.ts";

// Ids begin with their creation time to the second: within one second KV's order is the random suffix's, so compare sets.
const ids = (r: { json: { snapshots: { id: string }[] } }) => r.json.snapshots.map((s) => s.id).sort();
const set = (...xs: string[]) => [...xs].sort();

describe("names, labels and listing", () => {
  const made: Record<string, string> = {};
  let a: string, b: string, before: string;

  beforeAll(async () => {
    a = freshSandbox("list-a");
    b = freshSandbox("list-b");
    await agent(a, "POST", "/v1/datasets", { path: "/workspace/app", kind: "tricky", seed: 1 });
    await agent(a, "POST", "/v1/datasets", { path: "/workspace/other", kind: "tricky", seed: 2 });
    await agent(b, "POST", "/v1/datasets", { path: "/workspace/app", kind: "tricky", seed: 3 });
    const backup = async (key: string, body: Record<string, unknown>) => (made[key] = (await runWorkflow("backup", body)).snapshotId);
    await backup("a1", { sandboxId: a, path: "/workspace/app", strategy: "tar-zst-pipe", name: "first of a", labels: { env: "prod", team: "core" } });
    await backup("a2", { sandboxId: a, path: "/workspace/other", strategy: "tar-zst-pipe", labels: { env: "dev" } });
    before = new Date().toISOString();
    await new Promise((r) => setTimeout(r, 20));
    await backup("b1", { sandboxId: b, path: "/workspace/app", strategy: "tar-zst-pipe", name: "b's", labels: { env: "prod" }, ttl: "3d" });
    await backup("a3", { sandboxId: a, path: "/workspace/app", strategy: "tar-zst-delta", baseSnapshotId: made.a1 });
  });

  it("the record (in the store) and the summary (in KV) keep the name, labels, expiry and base", async () => {
    const rec = (await api("GET", `/api/snapshots/${made.b1}`)).json;
    expect(rec).toMatchObject({ name: "b's", labels: { env: "prod" } });
    expect(Date.parse(rec.expiresAt) - Date.parse(rec.createdAt)).toBe(3 * 86_400_000);
    const kv = await env.INDEX.getWithMetadata<any>(`snapshot:${made.b1}`);
    expect(kv.metadata).toMatchObject({ id: made.b1, name: "b's", labels: { env: "prod" }, expiresAt: rec.expiresAt, source: { sandboxId: b, path: "/workspace/app" } });
    expect((await env.INDEX.getWithMetadata<any>(`snapshot:${made.a3}`)).metadata).toMatchObject({ base: made.a1 });
  });

  it("filters by sandbox, path, label (repeatable, all must match), name and time", async () => {
    expect(ids(await api("GET", "/api/snapshots"))).toEqual(set(made.a1, made.a2, made.b1, made.a3));
    expect(ids(await api("GET", `/api/snapshots?sandboxId=${a}`))).toEqual(set(made.a1, made.a2, made.a3));
    expect(ids(await api("GET", `/api/snapshots?sandboxId=${a}&path=/workspace/app/`))).toEqual(set(made.a1, made.a3));
    expect(ids(await api("GET", "/api/snapshots?label=env=prod"))).toEqual(set(made.a1, made.b1));
    expect(ids(await api("GET", "/api/snapshots?label=env=prod&label=team=core"))).toEqual(set(made.a1));
    expect(ids(await api("GET", "/api/snapshots?label=team"))).toEqual(set(made.a1));
    expect(ids(await api("GET", `/api/snapshots?name=${encodeURIComponent("first of a")}`))).toEqual(set(made.a1));
    expect(ids(await api("GET", `/api/snapshots?since=${before}`))).toEqual(set(made.b1, made.a3));
    expect(ids(await api("GET", `/api/snapshots?until=${before}`))).toEqual(set(made.a1, made.a2));
    expect(ids(await api("GET", "/api/snapshots?since=1h"))).toHaveLength(4);
  });

  it("pages with a cursor, filters applied across pages", async () => {
    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const r = await api("GET", `/api/snapshots?sandboxId=${a}&limit=1${cursor ? `&cursor=${cursor}` : ""}`);
      expect(r.status).toBe(200);
      expect(r.json.snapshots.length).toBeLessThanOrEqual(1);
      seen.push(...ids(r));
      cursor = r.json.cursor;
      pages++;
    } while (cursor && pages < 10);
    expect(seen.sort()).toEqual(set(made.a1, made.a2, made.a3));
  });

  it("a summary too long for KV's list metadata (a long path) is still listed and filtered", async () => {
    const long = `/workspace/${("d".repeat(200) + "/").repeat(5)}app`;
    const c = freshSandbox("list-long");
    await agent(c, "POST", "/v1/datasets", { path: long, kind: "tricky", seed: 4 });
    const id = (await runWorkflow("backup", { sandboxId: c, path: long, strategy: "tar-zst-pipe", labels: { long: "yes" } })).snapshotId;
    expect((await env.INDEX.getWithMetadata<any>(`snapshot:${id}`)).metadata).toEqual({ id, inValue: true });
    const r = await api("GET", `/api/snapshots?sandboxId=${c}&label=long=yes`);
    expect(r.json.snapshots).toMatchObject([{ id, source: { sandboxId: c, path: long }, labels: { long: "yes" } }]);
  });

  it.each([
    ["label=bad key=1", "label"],
    ["label==v", "label"],
    ["since=yesterday", "since"],
    ["until=2026-13-45", "until"],
    ["limit=0", "limit"],
    ["cursor=not-a-cursor", "cursor"],
    ["sandboxId=Bad!", "sandboxId"],
    ["path=/etc", "path"],
    ["colour=blue", "colour"],
  ])("GET /api/snapshots?%s → 400 naming %s", async (query, field) => {
    const r = await api("GET", `/api/snapshots?${query}`);
    expect(r.status).toBe(400);
    expect(r.json.error).toMatchObject({ code: "bad_request", field });
  });

  it.each([
    ["an empty name", { name: "" }, "name"],
    ["a name of 65 characters", { name: "x".repeat(65) }, "name"],
    ["a label key with a space", { labels: { "a b": "c" } }, "labels.a b"],
    ["a label value too long", { labels: { k: "v".repeat(49) } }, "labels.k"],
    ["nine labels", { labels: Object.fromEntries([...Array(9).keys()].map((i) => [`k${i}`, "v"])) }, "labels"],
    ["a ttl without unit", { ttl: "3" }, "ttl"],
    ["a ttl of zero", { ttl: 0 }, "ttl"],
    ["a ttl of a century", { ttl: "5300w" }, "ttl"],
  ])("POST /api/backups with %s → 400 naming %s, nothing started", async (_what, extra, field) => {
    await using wf = await introspectWorkflow(env.BACKUP_WORKFLOW);
    const r = await api("POST", "/api/backups", { sandboxId: "s1", ...extra });
    expect(r.status).toBe(400);
    expect(r.json.error).toMatchObject({ code: "bad_request", field });
    expect(await wf.get()).toHaveLength(0);
  });
});
