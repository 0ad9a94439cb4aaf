// The whole local stack killed mid-transfer and started again (issue 9, items 5 and 8): a private stack —
// wrangler dev (Workflows, KV), the host agent, SeaweedFS — runs a backup and a restore, is SIGKILLed (every
// process group at once, no clean shutdown) while both transfer, and is started again on the same state, port and
// secrets. Within 30 s of the stack being up each run is running again (its status says it was interrupted and
// resumed) or has ended failed naming the interruption; then it ends complete (the snapshot restores equal; the
// restore's target is the snapshot's tree) or failed (no snapshot, no objects; the target as it was). Nothing is
// left: no open multipart upload, upload record, lease, staging file, tree beside the target, swap journal or mount.
// Then the supervisor `npm run dev` uses: the agent, then the object store, SIGKILLed alone come back on their
// ports, and the next run completes.
import { createHash } from "node:crypto";
import { createReadStream, existsSync, lstatSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AwsClient } from "aws4fetch";
import { afterAll, beforeAll, expect, it } from "vitest";
import { apiClient, type RunStatus } from "../../scripts/cli/api-client.ts";
import { BUCKET, freePort, startStack, type Stack } from "../../scripts/stack/stack.ts";
import { stackSecrets } from "../../scripts/stack/stack.ts";

let dir: string;
let port: number;
let stack: Stack | undefined;
const log = (l: string) => console.error(`[${new Date().toISOString().slice(11, 23)}] ${l}`);
const start = () => startStack({ port, privateDir: dir, log, supervise: true });
const api = () => apiClient(stack!.apiUrl, stack!.apiToken);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const ENDED = ["complete", "errored", "terminated"];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "snapflow-restart-"));
  port = await freePort();
  stack = await start();
}, 120_000);

afterAll(async () => {
  await stack?.stop();
  // What the watchdog found and did, from the Worker's log (for the fault table and for a failure's reader).
  const wlog = join(dir ?? "", "logs", "wrangler.log");
  if (dir && existsSync(wlog)) for (const l of readFileSync(wlog, "utf8").split("\n").filter((x) => x.includes("watchdog") || x.includes("earlier transfer attempt"))) log(`worker: ${l.slice(0, 600)}`);
  if (dir) rmSync(dir, { recursive: true, force: true });
}, 60_000);

const sandboxRoot = (id: string) => join(dir, "sandboxes", id);

/** path → type, size, SHA-256 (files) or target (symlinks): what "the same tree" means here. */
async function treeOf(root: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  const walk = async (rel: string) => {
    for (const name of readdirSync(join(root, rel)).sort()) {
      const r = rel ? `${rel}/${name}` : name;
      const st = lstatSync(join(root, r));
      if (st.isSymbolicLink()) out.set(r, `link ${readlinkSync(join(root, r))}`);
      else if (st.isDirectory()) {
        out.set(r, "dir");
        await walk(r);
      } else {
        const h = createHash("sha256");
        for await (const chunk of createReadStream(join(root, r))) h.update(chunk as Buffer);
        out.set(r, `file ${st.size} ${h.digest("hex")}`);
      }
    }
  };
  await walk("");
  return out;
}

function s3() {
  const secrets = stackSecrets(dir, () => {});
  const client = new AwsClient({ accessKeyId: secrets.s3AccessKeyId, secretAccessKey: secrets.s3SecretAccessKey, service: "s3", region: "auto" });
  const base = `${stack!.s3Endpoint}/${BUCKET}`;
  const keys = (xml: string, tag: string) => [...xml.matchAll(new RegExp(`<${tag}>([^<]*)</${tag}>`, "g"))].map((m) => m[1]!);
  return {
    openUploads: async () => keys(await (await client.fetch(`${base}?uploads`)).text(), "Key"),
    list: async (prefix: string) => keys(await (await client.fetch(`${base}?list-type=2&prefix=${encodeURIComponent(prefix)}`)).text(), "Key"),
  };
}

/** What a run may leave in the store and the sandboxes: asserted empty. */
async function leftovers(sandboxes: string[]): Promise<string[]> {
  const store = s3();
  const found = [
    ...(await store.openUploads()).map((k) => `open multipart upload ${k}`),
    ...(await store.list("uploads/")).map((k) => `upload record ${k}`),
    ...(await store.list("targets/")).map((k) => `lease ${k}`),
  ];
  for (const id of sandboxes) {
    const root = sandboxRoot(id);
    for (const d of ["snapflow/staging", "snapflow/swaps", "snapflow/images", "snapflow/lazy"]) {
      if (existsSync(join(root, d))) found.push(...readdirSync(join(root, d)).map((n) => `${id}:/${d}/${n}`));
    }
    found.push(...readdirSync(join(root, "workspace")).filter((n) => n.startsWith(".snapflow-")).map((n) => `${id}:/workspace/${n}`));
  }
  found.push(...readFileSync("/proc/self/mountinfo", "utf8").split("\n").filter((l) => l.includes(dir)).map((l) => `mount ${l}`));
  return found;
}

async function waitEnded(kind: "backup" | "restore", id: string, timeoutMs: number): Promise<RunStatus & { interrupted?: string[] }> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const s = await api().call<RunStatus & { interrupted?: string[] }>("GET", `/api/${kind}s/${id}`);
    if (ENDED.includes(s.status)) return s;
    if (Date.now() > deadline) throw new Error(`${kind} ${id} still ${s.status} after ${timeoutMs / 1000} s: ${JSON.stringify(s).slice(0, 500)}`);
    await sleep(500);
  }
}

function faultRow(row: { fault: string; phase: string; outcome: string; retries: number | string; ms: number; leftovers: string[] }): void {
  expect(row.leftovers, `left behind after: ${row.fault}`).toEqual([]);
  console.log(`FAULT-ROW | ${row.fault} | ${row.phase} | ${row.outcome} | ${row.retries} | ${(row.ms / 1000).toFixed(1)} s | ${row.leftovers.length} |`);
}

it("a backup and a restore cut off by SIGKILLing the whole stack mid-transfer are resumed (or failed, cleaned up) after it restarts", async () => {
  // A source big enough that a transfer takes seconds, and a snapshot of it to restore.
  await api().generateDataset("src", { path: "/workspace/app", kind: "added-data", files: 1000, bytes: 10_000_000, addedBytes: 300_000_000 });
  const b0 = await api().startBackup({ sandboxId: "src", path: "/workspace/app", strategy: "tar-zst-pipe" });
  expect((await waitEnded("backup", b0.id, 120_000)).status).toBe("complete");
  const source = await treeOf(join(sandboxRoot("src"), "workspace/app"));
  // The restore's target holds a tree of its own: replaced if the restore completes, kept exactly if it fails.
  await api().generateDataset("dst", { path: "/workspace/app", kind: "tricky", seed: 7 });
  const before = await treeOf(join(sandboxRoot("dst"), "workspace/app"));

  // A benchmark matrix in flight too: its cell Workflow holds no lease, and must not be left stuck either.
  const matrix = await api().call<{ id: string }>("POST", "/api/matrices", { name: "restart", datasets: [{ name: "mid", kind: "node-modules", seed: 5, files: 300, bytes: 40_000_000 }], backups: ["tar-zst-pipe"], restores: ["presigned-tar-zst-pipe"], runs: 1, dropCaches: false });
  const r = await api().startRestore({ snapshotId: b0.id, sandboxId: "dst", path: "/workspace/app", replace: true, strategy: "presigned-tar-zst-pipe" });
  const b1 = await api().startBackup({ sandboxId: "src", path: "/workspace/app", strategy: "tar-zst-pipe" });
  // Both in their transfer step: the backup past archive (its transfer streams), the restore past its probe.
  for (const deadline = Date.now() + 60_000; ; ) {
    const [sb, sr] = [await api().backup(b1.id), await api().restore(r.id)];
    if (sb.steps.archive && sr.steps.probe) break;
    if (Date.now() > deadline) throw new Error(`not both transferring after 60 s: ${JSON.stringify([sb, sr]).slice(0, 500)}`);
    await sleep(50);
  }
  // The matrix's cell has begun (its sandbox exists): a queue message still in flight at the kill is lost with the
  // local queue, which this test does not cover (docs/faults.md "Not covered yet").
  for (const deadline = Date.now() + 60_000; !readdirSync(join(dir, "sandboxes")).some((id) => !["src", "dst"].includes(id)); await sleep(50)) {
    if (Date.now() > deadline) throw new Error("the matrix's cell did not begin within 60 s");
  }
  await sleep(700);
  const [atKillB, atKillR] = [await api().backup(b1.id), await api().restore(r.id)];
  // The point of the test: neither had finished its transfer when the stack died.
  expect(atKillB.status).toBe("running");
  expect(atKillB.steps.transfer).toBeUndefined();
  expect(atKillR.status).toBe("running");
  expect(atKillR.steps.transfer).toBeUndefined();
  const killedAt = Date.now();
  await stack!.kill();
  log("stack killed");
  stack = await start();
  const upAt = stack.upAt;

  // Within 30 s of the stack being up: running again and saying it was interrupted, or failed naming it.
  const seen: Record<string, { status: string; at: number; interrupted?: string[]; error?: string }> = {};
  for (const deadline = upAt + 30_000; Object.keys(seen).length < 2 && Date.now() < deadline; await sleep(250)) {
    for (const [kind, id] of [["backup", b1.id], ["restore", r.id]] as const) {
      if (seen[id]) continue;
      const s = await api().call<RunStatus & { interrupted?: string[] }>("GET", `/api/${kind}s/${id}`);
      const resumed = !ENDED.includes(s.status) && (s.interrupted ?? []).some((l) => /stack restarted .*resumed/.test(l));
      const failed = ENDED.includes(s.status) && s.status !== "complete" && /interrupt|restart/i.test(`${s.error} ${s.interrupted}`);
      if (resumed || failed || s.status === "complete") seen[id] = { status: s.status, at: Date.now(), interrupted: s.interrupted, error: s.error };
    }
  }
  log(`after the restart: ${JSON.stringify(seen)}`);
  expect(Object.keys(seen).sort()).toEqual([b1.id, r.id].sort());
  for (const v of Object.values(seen)) expect(v.at - upAt).toBeLessThan(30_000);

  const endB = await waitEnded("backup", b1.id, 120_000);
  const endR = await waitEnded("restore", r.id, 120_000);
  log(`ended: backup ${endB.status} ${endB.error ?? ""}; restore ${endR.status} ${endR.error ?? ""}`);
  for (const end of [endB, endR]) expect(end.interrupted?.join("\n")).toMatch(/the stack restarted at/);

  // The backup: complete and restorable equal, or failed with nothing of it left.
  if (endB.status === "complete") {
    const check = await api().startRestore({ snapshotId: b1.id, sandboxId: "check", path: "/workspace/app" });
    expect((await waitEnded("restore", check.id, 120_000)).status).toBe("complete");
    expect(await treeOf(join(sandboxRoot("check"), "workspace/app"))).toEqual(source);
  } else {
    expect(endB.error).toMatch(/interrupt|restart/i);
    expect((await api().call<{ snapshots: { id: string }[] }>("GET", "/api/snapshots")).snapshots.map((x) => x.id)).not.toContain(b1.id);
    expect(await s3().list(`snapshots/${b1.id}/`)).toEqual([]);
  }
  // The restore: the snapshot's tree at the target, or the target exactly as it was.
  const target = await treeOf(join(sandboxRoot("dst"), "workspace/app"));
  if (endR.status === "complete") expect(target).toEqual(source);
  else expect(target).toEqual(before);
  // The snapshot restored from keeps its objects.
  expect((await s3().list(`snapshots/${b0.id}/`)).length).toBeGreaterThanOrEqual(3);

  // The matrix's run ends (complete or failed is the cell's own result); the matrix completes.
  let progress: { status: string; done: number; failed: number } | undefined;
  for (const deadline = Date.now() + 120_000; Date.now() < deadline; await sleep(1000)) {
    progress = (await api().call<{ progress: typeof progress }>("GET", `/api/matrices/${matrix.id}`)).progress;
    if (progress?.status === "complete") break;
  }
  log(`matrix after the restart: ${JSON.stringify(progress)}`);
  expect(progress).toMatchObject({ status: "complete", done: 1 });

  const left = await leftovers(["src", "dst", "check"].filter((id) => existsSync(sandboxRoot(id))));
  faultRow({ fault: "whole stack SIGKILLed mid-transfer, started again", phase: "backup transfer (tar-zst-pipe, Worker multipart)", outcome: `${endB.status}${endB.status === "complete" ? ", restored equal" : `: ${endB.error}`}; resumed ${((seen[b1.id]!.at - upAt) / 1000).toFixed(1)} s after the stack was up`, retries: "1 (watchdog: pause + resume at transfer)", ms: Date.now() - killedAt, leftovers: left });
  faultRow({ fault: "whole stack SIGKILLed mid-transfer, started again", phase: "restore transfer (presigned-tar-zst-pipe, replace)", outcome: `${endR.status}${endR.status === "complete" ? ", target is the snapshot's tree" : `: ${endR.error}; target as it was`}; resumed ${((seen[r.id]!.at - upAt) / 1000).toFixed(1)} s after the stack was up`, retries: "1 (watchdog: pause + resume at transfer)", ms: Date.now() - killedAt, leftovers: left });
}, 360_000);

it("the supervisor restarts a SIGKILLed agent, then object store, on their ports, and the next run completes", async () => {
  await api().generateDataset("sup", { path: "/workspace/app", kind: "tricky", seed: 3 });
  for (const part of ["agent", "store"] as const) {
    const before = stack!.parts.restarts()[part];
    const t = Date.now();
    await (part === "agent" ? stack!.parts.agent() : stack!.parts.store()).kill();
    for (const deadline = Date.now() + 30_000; stack!.parts.restarts()[part] === before; await sleep(100)) {
      if (Date.now() > deadline) throw new Error(`${part} not restarted within 30 s`);
    }
    const back = Date.now() - t;
    const b = await api().startBackup({ sandboxId: "sup", path: "/workspace/app", strategy: "tar-zst-pipe" });
    const end = await waitEnded("backup", b.id, 120_000);
    expect(end.status, end.error).toBe("complete");
    faultRow({ fault: `${part === "agent" ? "agent" : "object store"} SIGKILLed under the dev supervisor`, phase: "between runs", outcome: `restarted on its port in ${(back / 1000).toFixed(1)} s; the next backup complete`, retries: 0, ms: Date.now() - t, leftovers: await leftovers(["sup"]) });
  }
  // Nothing gave up: the stack is still whole.
  expect(await Promise.race([stack!.died, sleep(100).then(() => "alive")])).toBe("alive");
}, 240_000);

it("the agent, then the object store, SIGKILLed mid-transfer under the supervisor: the backup's step is retried against the part restarted, and completes", async () => {
  // The 300 MB source of the first test: a transfer of seconds.
  for (const part of ["agent", "store"] as const) {
    const before = stack!.parts.restarts()[part];
    const b = await api().startBackup({ sandboxId: "src", path: "/workspace/app", strategy: "tar-zst-pipe" });
    for (const deadline = Date.now() + 60_000; !(await api().backup(b.id)).steps.archive; await sleep(50)) {
      if (Date.now() > deadline) throw new Error(`backup ${b.id} never reached its transfer`);
    }
    await sleep(700);
    expect((await api().backup(b.id)).steps.transfer).toBeUndefined();
    const t = Date.now();
    await (part === "agent" ? stack!.parts.agent() : stack!.parts.store()).kill();
    const end = await waitEnded("backup", b.id, 180_000);
    expect(end.status, end.error).toBe("complete");
    expect(stack!.parts.restarts()[part]).toBe(before + 1);
    const check = await api().startRestore({ snapshotId: b.id, sandboxId: `check-${part}`, path: "/workspace/app" });
    expect((await waitEnded("restore", check.id, 120_000)).status).toBe("complete");
    expect((await treeOf(join(sandboxRoot(`check-${part}`), "workspace/app"))).size).toBeGreaterThan(1000);
    faultRow({ fault: `${part === "agent" ? "agent" : "object store"} SIGKILLed mid-transfer under the dev supervisor`, phase: "backup transfer (tar-zst-pipe, Worker multipart)", outcome: "complete (the step retried against the restarted part), restored", retries: "the transfer step's retry", ms: Date.now() - t, leftovers: await leftovers(["src", `check-${part}`]) });
  }
}, 360_000);
