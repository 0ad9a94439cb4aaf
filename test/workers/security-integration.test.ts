// Security properties the Worker shows by itself (issue 12): the results page through a signed, expiring,
// read-only link (never the API token in a URL) with headers that keep it from leaking or running foreign code;
// weak secrets refused at start; the agent's own area refused as a user path.
import { env, exports } from "cloudflare:workers";
import { introspectWorkflow } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { agentTokenFor } from "../../container/contract/agent-token.ts";
import { signResultsLink } from "../../src/api/results-link.ts";
import { readConfig } from "../../src/config.ts";
import { matrixKeys } from "../../src/matrix/matrix-records.ts";
import { cellsOf, MatrixSpec } from "../../src/matrix/matrix-spec.ts";
import { StoreError } from "../../src/store/object-store.ts";
import { phase } from "../../workflows/step-config.ts";
import worker from "../../worker.ts";
import { depsFrom } from "../../src/deps.ts";
import { archiveKey, putJson } from "../../src/snapshots/records.ts";
import { DEFAULT_BACKUP, findBackup } from "../../src/strategies/registry.ts";
import { verifyPhase } from "../../src/backup/backup-phases.ts";
import { agent, agentRequests, api, freshSandbox, leftovers, putFile, runWorkflow, testStore } from "./helpers.ts";
import { apiErrorLine } from "../../scripts/cli/api-error-line.ts";

const page = (path: string) => exports.default.fetch(`http://snapflow.test${path}`);

async function runningMatrix(): Promise<string> {
  const id = `mx-sec-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 6)}`;
  const now = new Date().toISOString();
  // A matrix exists when its record does (the store is the status's source): one with no runs yet, so it stays running.
  const spec = MatrixSpec.parse({ name: "security", datasets: [{ name: "tricky", kind: "tricky", seed: 3 }], backups: ["tar-zst-pipe"], restores: ["presigned-tar-zst-pipe"], runs: 1 });
  await putJson(depsFrom(env).store, matrixKeys(id).record, { id, spec, cells: cellsOf(spec), createdAt: now, trigger: "http" });
  return id;
}

describe("results page: a signed link, not the API token", () => {
  it("POST /api/matrices/:id/link gives a link that opens the page, with no-referrer, no-store and a nonce CSP", async () => {
    const id = await runningMatrix();
    const link = await api("POST", `/api/matrices/${id}/link`, { ttlSeconds: 600 });
    expect(link.status).toBe(201);
    const url = new URL(link.json.url);
    expect(url.pathname).toBe(`/matrices/${id}`);
    expect(url.search).not.toContain(env.API_TOKEN);
    expect(Date.parse(link.json.expiresAt) - Date.now()).toBeGreaterThan(500_000);
    const r = await page(url.pathname + url.search);
    expect(r.status).toBe(200);
    expect(r.headers.get("referrer-policy")).toBe("no-referrer");
    expect(r.headers.get("cache-control")).toBe("no-store");
    expect(r.headers.get("x-content-type-options")).toBe("nosniff");
    const csp = r.headers.get("content-security-policy")!;
    const nonce = /script-src 'nonce-([^']+)'/.exec(csp)?.[1];
    expect(csp).toMatch(/default-src 'none'/);
    expect(csp).not.toMatch(/unsafe-inline|unsafe-eval|\*/);
    const html = await r.text();
    // The one inline script (the reload while running) and the style carry the nonce; nothing else runs.
    expect(html.match(/<script[^>]*>/g)).toEqual([`<script nonce="${nonce}">`]);
    expect(html).toContain(`<style nonce="${nonce}">`);
    // A fresh nonce per response.
    const again = await page(url.pathname + url.search);
    expect(again.headers.get("content-security-policy")).not.toContain(nonce);
  });

  it.each([
    ["the API token as ?token= (the old way)", async (id: string) => `/matrices/${id}?token=${env.API_TOKEN}`, "exp"],
    // Its first character changed (to "A", or "B" when it was "A": replaced by itself 1 time in 64, it passed).
    ["a tampered signature", async (id: string) => (await signResultsLink(env.API_TOKEN, id, 4102444800)).replace(/sig=(.)/, (_m, c: string) => `sig=${c === "A" ? "B" : "A"}`), "sig"],
    ["a later expiry than was signed", async (id: string) => (await signResultsLink(env.API_TOKEN, id, 4102444800)).replace("exp=4102444800", "exp=4102444801"), "sig"],
    ["another matrix's link", async (id: string) => (await signResultsLink(env.API_TOKEN, `${id}-other`, 4102444800)).replace(`${id}-other`, id), "sig"],
    ["an expired link", async (id: string) => signResultsLink(env.API_TOKEN, id, Math.floor(Date.now() / 1000) - 1), "exp"],
  ])("%s is a 401 naming %s", async (_what, make, field) => {
    const id = await runningMatrix();
    const r = await page(await make(id));
    expect(r.status).toBe(401);
    expect(((await r.json()) as any).error).toMatchObject({ code: "unauthorized", field });
  });

  it("a link does not open the API", async () => {
    const id = await runningMatrix();
    const link = new URL((await api("POST", `/api/matrices/${id}/link`, {})).json.url);
    const r = await exports.default.fetch(`http://snapflow.test/api/matrices/${id}${link.search}`);
    expect(r.status).toBe(401);
  });
});

describe("weak secrets are refused when the config is read, naming the variable", () => {
  const random32 = () => btoa(String.fromCharCode(...crypto.getRandomValues(new Uint8Array(24))));
  it.each(["API_TOKEN", "AGENT_SECRET"])("%s", (name) => {
    const refused = (value: string | undefined) => () => readConfig({ ...env, [name]: value } as Env);
    expect(refused(undefined)).toThrow(new RegExp(`^configuration: ${name}: set the ${name} secret to at least 32 random characters`));
    expect(refused("change-me")).toThrow(new RegExp(`^configuration: ${name}: set the ${name} secret to at least 32 random characters .*it has 9`));
    expect(refused("x".repeat(40))).toThrow(new RegExp(`^configuration: ${name}: ${name} is not random \\(only 1 distinct`));
    expect(refused("change-me".repeat(4))).toThrow(new RegExp(`^configuration: ${name}: ${name} is not random \\(it repeats a shorter pattern`));
    // What the stack generates, and what the message suggests, pass.
    const good = random32();
    expect(good).toHaveLength(32);
    expect(refused(good)).not.toThrow();
  });
  it("the API answers a weak API_TOKEN with config_error, before any route runs", async () => {
    const r = await worker.fetch(new Request("http://snapflow.test/api/snapshots", { headers: { authorization: "Bearer change-me" } }), { ...env, API_TOKEN: "change-me" } as Env, {} as ExecutionContext);
    expect(r.status).toBe(500);
    expect(((await r.json()) as any).error).toMatchObject({ code: "config_error", message: expect.stringMatching(/API_TOKEN/) });
  });
});

describe("/snapflow (the agent's staging, image and overlay area) is not a user path", () => {
  it.each([
    ["POST", "/api/backups", { sandboxId: "s1", path: "/snapflow/images" }],
    ["POST", "/api/restores", { sandboxId: "s1", snapshotId: "bk-20260101000000-00000000", path: "/snapflow" }],
    ["POST", "/api/sandboxes/s1/datasets", { path: "/snapflow/staging/x", kind: "tricky" }],
  ])("%s %s", async (method, path, body) => {
    await using backups = await introspectWorkflow(env.BACKUP_WORKFLOW);
    await using restores = await introspectWorkflow(env.RESTORE_WORKFLOW);
    const r = await api(method, path, body);
    expect(r.status).toBe(400);
    expect(r.json.error).toMatchObject({ code: "bad_request", field: "path" });
    expect(r.json.error.message).toMatch(/snapflow's own area/);
    expect([...(await backups.get()), ...(await restores.get())]).toHaveLength(0);
  });
});

describe("per-sandbox agent credentials (container/contract/agent-token.ts)", () => {
  const ask = async (sandbox: string, token: string | undefined, path = "/v1/probe") =>
    (await fetch(`${env.AGENT_URL}${path}`, { headers: { "x-snapflow-sandbox": sandbox, ...(token === undefined ? {} : { authorization: `Bearer ${token}` }) } })).status;

  it("a sandbox's token opens that sandbox only: stolen from A, it is refused for B", async () => {
    const a = `sec-a-${Date.now().toString(36)}`;
    const b = `sec-b-${Date.now().toString(36)}`;
    const tokenA = await agentTokenFor(env.AGENT_SECRET, a);
    expect(await ask(a, tokenA)).toBe(200);
    expect(await ask(b, tokenA)).toBe(401);
    expect(await ask(b, await agentTokenFor(env.AGENT_SECRET, b))).toBe(200);
    // The Worker's secret itself is not a token.
    expect(await ask(a, env.AGENT_SECRET)).toBe(401);
  });

  it("readiness (/v1/health) is authenticated too", async () => {
    const sb = `sec-health-${Date.now().toString(36)}`;
    expect(await ask(sb, undefined, "/v1/health")).toBe(401);
    expect(await ask(sb, "x".repeat(64), "/v1/health")).toBe(401);
    expect(await ask(sb, await agentTokenFor(env.AGENT_SECRET, sb), "/v1/health")).toBe(200);
  });
});

describe("a presigned URL never reaches a persisted error", () => {
  const signed = "https://acct.r2.cloudflarestorage.com/b/snapshots/x/archive.tar.zst?X-Amz-Credential=AKIA&X-Amz-Signature=deadbeef";
  // What a step throws is what Workflows keeps in the step's attempts: retried (transient) errors as well as the
  // permanent ones that stop the run.
  it.each([
    ["a transient error of any class (retried)", () => new TypeError(`fetch ${signed} failed: ECONNRESET`), "TypeError"],
    ["a transient store error (retried)", () => new StoreError("k", `GET ${signed}: 503`, 503), "Error"],
    ["a permanent store error (stops the run)", () => new StoreError("k", `PUT ${signed}: 403`, 403), "NonRetryableError"],
  ])("%s", async (_what, make, name) => {
    const thrown = await phase(async () => {
      throw make();
    }).catch((e: Error) => e);
    expect(thrown).toBeInstanceOf(Error);
    expect((thrown as Error).name).toBe(name);
    expect((thrown as Error).message).toContain("archive.tar.zst?<redacted>");
    expect((thrown as Error).message).not.toMatch(/Signature|Credential|deadbeef/);
  });
});

describe("a lying agent's backup is refused by the store's checksum (through the BackupWorkflow)", () => {
  // The attack: the agent hashes its staged archive in the archive step, and then the sandbox (whose code nobody
  // reviewed) swaps the staged file for other bytes before the transfer sends it. The Worker passes the hash the
  // archive step reported to the store, which checks the body against it: presigned-put signs
  // x-amz-checksum-sha256 into the URL the agent PUTs to; stream puts it on the Worker's own put.
  // The first transfer attempt is made to fail before it runs (mockStepError), and retry delays stay on: the
  // 5 s before the real attempt is when the sandbox swaps its file. Everything else is real.
  it.each([
    ["tar-zst-presigned", "presigned PUT"],
    ["tar-zst-direct", "the Worker's stream put"],
  ])("%s (%s): the run errs with the store's BadDigest and nothing is stored or listed", async (strategy) => {
    const src = freshSandbox("liar");
    await putFile(src, "/workspace/app/a.txt", "honest\n");
    await using wf = await introspectWorkflow(env.BACKUP_WORKFLOW);
    await wf.modifyAll(async (m) => {
      await m.mockStepError({ name: "transfer" }, new Error("the first attempt fails before it runs: a window for the swap"), 1);
    });
    const t0 = Date.now();
    const started = await api("POST", "/api/backups", { sandboxId: src, path: "/workspace/app", strategy });
    expect(started.status).toBe(202);
    const id: string = started.json.id;
    const status = async () => (await api("GET", `/api/backups/${id}`)).json;
    const until = async (done: (s: any) => boolean) => {
      for (const deadline = Date.now() + 60_000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 100))) {
        const s = await status();
        if (done(s)) return s;
      }
      throw new Error(`backup ${id}: ${JSON.stringify(await status())}`);
    };
    const archived = (await until((s) => s.steps?.archive !== undefined)).steps.archive;
    // Other bytes of the same size: nothing but their hash gives them away.
    await putFile(src, `/snapflow/staging/${id}.tar.zst`, "x".repeat(archived.bytes));
    const ended = await until((s) => s.status === "errored" || s.status === "complete");
    expect(ended.status).toBe("errored");
    expect(ended.error).toMatch(/BadDigest/);
    // Refused for good: the real attempt was the only one (retries would wait 10 s, then 20 s, to be refused again).
    expect(Date.now() - t0).toBeLessThan(14_000);
    expect(ended.error).not.toMatch(/X-Amz-Signature/);
    // Nothing under the snapshot's key, and no snapshot.
    expect(await depsFrom(env).store.head(archiveKey(id, { kind: "tar", compression: "zstd", level: 3 } as any))).toBeNull();
    expect((await api("GET", `/api/snapshots/${id}`)).status).toBe(404);
    expect((await api("GET", `/api/snapshots?sandboxId=${src}`)).json.snapshots).toEqual([]);
  });
});

describe("a lying sandbox's presigned multipart upload is refused by the store's part checksums (through the BackupWorkflow)", () => {
  // The attack: the sandbox (armed through the test-only fault hook, container/http/faults.ts; the engine that PUTs the
  // parts, given `lie`) hashes each part from its buffer, then sends other bytes for part 1, and reports the hashes of
  // the bytes it did not send. The Worker lists those hashes in CompleteMultipartUpload; the store holds part 1's real
  // bytes and refuses the completion. Without the part checksums the completion would go through, and only verify's
  // read-back (objects up to 512 MiB) could find the lie; above that, the sandbox would have read its own object back.
  // Both run the API's default backup (no strategy given), which is this path, its parts PUT by the engine.
  const strategy = "tar-zst-presigned-multipart";

  it(`the default backup (${strategy}, the engine's parts): the run errs with the store's BadDigest at completion, once; nothing is stored, listed or left open`, async () => {
    expect(DEFAULT_BACKUP).toBe(strategy);
    const src = freshSandbox("liar-parts");
    await putFile(src, "/workspace/app/a.txt", "honest\n");
    await agent(src, "POST", "/v1/faults", { route: "POST /v1/upload-multipart", times: 1, action: "lie" });
    const ended = await runWorkflow("backup", { sandboxId: src, path: "/workspace/app" }, "errored");
    expect(ended.error).toMatch(/complete multipart upload failed: HTTP 400 BadDigest/);
    expect(ended.error).not.toMatch(/X-Amz-Signature/);
    // Refused for good: the agent was asked to upload once (a retried step would have asked again, and told the truth).
    expect(await agentRequests(src, "/v1/upload-multipart")).toEqual(["POST /v1/upload-multipart"]);
    expect(await depsFrom(env).store.head(archiveKey(ended.id, { kind: "tar", compression: "zstd", level: 3 } as any))).toBeNull();
    expect((await api("GET", `/api/snapshots/${ended.id}`)).status).toBe(404);
    expect((await api("GET", `/api/snapshots?sandboxId=${src}`)).json.snapshots).toEqual([]);
    // No open multipart upload, no upload record, nothing in the sandbox's staging area.
    expect(await leftovers(src, "/workspace/app", ended.id)).toEqual([]);
  });

  it(`the default backup (${strategy}), honest: the engine PUT the parts, no archive byte through the Worker; verify reads the store's composite back, the check made`, async () => {
    const src = freshSandbox("honest-parts");
    await putFile(src, "/workspace/app/a.txt", "honest\n");
    const b = await runWorkflow("backup", { sandboxId: src, path: "/workspace/app" });
    expect((await api("GET", `/api/snapshots/${b.snapshotId}`)).json.strategy).toBe(strategy);
    expect(findBackup(strategy)!.path).toBe("presigned-multipart");
    // The engine cut and PUT the parts itself, sized by the tree count (no hashing walk first); the Worker never asked
    // the agent for the archive's bytes (GET /v1/archive is what a relayed path streams through it).
    expect(b.steps.transfer).toMatchObject({ uploadedBy: "engine", engine: "native", sizeBy: "native", parts: 1, attempts: 1 });
    expect(await agentRequests(src, "/v1/archive")).toEqual([]);
    expect(await agentRequests(src, "/v1/manifest")).toEqual([]);
    // Nor the manifest's: the sandbox PUT it to a URL bound to its SHA-256, and the Worker read no file of the sandbox.
    expect(await agentRequests(src, "/v1/upload")).toContain("POST /v1/upload");
    expect((await agentRequests(src, "/v1/files")).filter((r) => r.startsWith("GET"))).toEqual([]);
    const d = depsFrom(env);
    const key = archiveKey(b.snapshotId, { kind: "tar", compression: "zstd", level: 3 } as any);
    const kept = await d.presigner.storedChecksum(key);
    expect(kept).toMatch(/^[A-Za-z0-9+/]{43}=-1$/);
    // The store's composite is the check made, at any size: the archive is not read back through the Worker either.
    expect(b.steps.verify.checked).toBe(`part SHA-256s checked by the store (${kept})`);
    expect((await api("GET", `/api/snapshots/${b.snapshotId}`)).json.archive.storeChecksum).toBe(kept);
    const p = { snapshotId: b.snapshotId, sandboxId: src, path: "/workspace/app", strategy };
    const s = findBackup(strategy)!;
    const sent = b.steps.transfer;
    expect(await agentRequests(src, "/v1/hash-url")).toEqual([]);
    // Parts reported other than those the store checked: the composite differs and verify stops the run.
    const other = await verifyPhase(d, p, s, { ...sent, storeChecksum: `${"A".repeat(43)}=-1` }, 0).catch((e) => e);
    expect(other).toMatchObject({ code: "snapshot_unusable", message: expect.stringMatching(/the store's SHA-256 checksum is .*-1, the parts reported make A+=-1/) });
  });
});

describe("destructive defaults are off", () => {
  const read = async (sandbox: string, path: string) =>
    (await fetch(`${env.AGENT_URL}/v1/files?path=${encodeURIComponent(path)}`, { headers: { authorization: `Bearer ${await agentTokenFor(env.AGENT_SECRET, sandbox)}`, "x-snapflow-sandbox": sandbox } })).text();

  it("a restore into a target that holds files, without replace, is refused at the request (409 naming replace) and leaves the files", async () => {
    const src = freshSandbox("defaults-src");
    await putFile(src, "/workspace/app/a.txt", "from the snapshot\n");
    const { snapshotId } = await runWorkflow("backup", { sandboxId: src, path: "/workspace/app", strategy: "tar-zst-pipe" });
    const dst = freshSandbox("defaults-dst");
    await putFile(dst, "/workspace/app/mine.txt", "the sandbox's own work\n");
    {
      await using wf = await introspectWorkflow(env.RESTORE_WORKFLOW);
      const refused = await api("POST", "/api/restores", { snapshotId, sandboxId: dst, path: "/workspace/app" });
      expect(refused.status, JSON.stringify(refused.json)).toBe(409);
      expect(refused.json.error).toMatchObject({ code: "target_not_empty", field: "replace" });
      expect(refused.json.error.message).toBe(`restore target /workspace/app in sandbox ${dst} is not empty (it holds 1 entry); pass replace: true to overwrite it`);
      // The CLI says it with its own flag, on one line.
      expect(apiErrorLine("restore", refused.json.error)).toBe(`snapflow restore: restore target /workspace/app in sandbox ${dst} is not empty (it holds 1 entry); pass --replace to overwrite it`);
      expect(await wf.get()).toHaveLength(0);
      // The lease the request took on the snapshot went with the refusal: nothing holds up its deletion.
      expect((await (await testStore()).list(`restoring/${snapshotId}/`)).objects).toEqual([]);
    }
    expect(await read(dst, "/workspace/app/mine.txt")).toBe("the sandbox's own work\n");
    expect((await agent(dst, "GET", "/v1/stat?path=/workspace/app")).entries).toBe(1);
    // Asked for, it replaces.
    await runWorkflow("restore", { snapshotId, sandboxId: dst, path: "/workspace/app", replace: true });
    expect(await read(dst, "/workspace/app/a.txt")).toBe("from the snapshot\n");
    expect((await agent(dst, "GET", "/v1/stat?path=/workspace/app/mine.txt")).exists).toBe(false);
  });

  it("the dataset endpoint removes nothing already at its path unless replace: true", async () => {
    const sb = freshSandbox("defaults-dataset");
    await putFile(sb, "/workspace/data/mine.txt", "keep me\n");
    const made = await api("POST", `/api/sandboxes/${sb}/datasets`, { path: "/workspace/data", kind: "tricky" });
    expect(made.status, JSON.stringify(made.json)).toBe(201);
    expect(made.json.replace).toBe(false);
    expect(await read(sb, "/workspace/data/mine.txt")).toBe("keep me\n");
    expect((await api("POST", `/api/sandboxes/${sb}/datasets`, { path: "/workspace/data", kind: "tricky", replace: true })).status).toBe(201);
    expect((await agent(sb, "GET", "/v1/stat?path=/workspace/data/mine.txt")).exists).toBe(false);
  });
});
