// `snapflow status ID --follow` as a person runs it: the CLI as a process (Node 22, as npx runs it) against a private
// local stack (SeaweedFS, the host agent, wrangler dev). It prints the steps as the run advances and ends with the
// result line (exit 0) or the failure line (exit 1); Ctrl-C stops the following, not the run, and says how to
// cancel it.
import { spawn, type ChildProcess } from "node:child_process";
import { afterAll, beforeAll, expect, it } from "vitest";
import { AwsClient } from "aws4fetch";
import { loadSecrets } from "../../scripts/stack/stack-secrets.ts";
import { BUCKET, type Stack } from "../../scripts/stack/stack.ts";
import { startPrivateStack, type PrivateStack } from "./private-stack.ts";

const CLI = new URL("../../scripts/cli.ts", import.meta.url).pathname;

let stack: Stack;
let dir: string;
let api: PrivateStack["api"];
let running: PrivateStack | undefined;

beforeAll(async () => void ({ stack, dir, api } = running = await startPrivateStack("snapflow-follow-")), 120_000);
afterAll(() => running?.stop(), 60_000);

interface Run { child: ChildProcess; out: () => string; err: () => string; exit: Promise<number | null> }

/** The CLI as a process, told the private stack's API by the variables a user would set. */
function snapflow(...args: string[]): Run {
  const child = spawn(process.execPath, [CLI, ...args], { env: { ...process.env, SNAPFLOW_URL: stack.apiUrl, SNAPFLOW_TOKEN: stack.apiToken } });
  let out = "", err = "";
  child.stdout!.on("data", (b) => (out += b));
  child.stderr!.on("data", (b) => (err += b));
  const exit = new Promise<number | null>((resolve) => child.on("close", (code, signal) => resolve(code ?? (signal ? -1 : null))));
  return { child, out: () => out, err: () => err, exit };
}

const until = async (what: () => boolean, ms = 60_000) => {
  const end = Date.now() + ms;
  while (!what()) {
    if (Date.now() > end) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 50));
  }
};

/** `backup --no-wait`, as a user starts one to follow later; its id from the line it prints. */
async function startBackup(sandbox: string, path: string): Promise<string> {
  const r = snapflow("backup", "--sandbox", sandbox, "--path", path, "--no-wait");
  expect(await r.exit, r.err()).toBe(0);
  return /^backup (bk-\S+) started/.exec(r.out())![1]!;
}

it("follows a backup step by step to its result line (exit 0), and a restore with -f", async () => {
  await api.generateDataset("follow-src", { path: "/workspace/app", kind: "node-modules", seed: 5, files: 2000, bytes: 60_000_000 });
  const id = await startBackup("follow-src", "/workspace/app");
  const f = snapflow("status", id, "--follow");
  expect(await f.exit, f.err()).toBe(0);
  const err = f.err().split("\n");
  expect(err[0]).toBe(`backup ${id}: following until it ends (Ctrl-C stops following, not the backup)`);
  // Each of the backup's steps once, in order, as stepLine prints them.
  const steps = err.slice(1).filter(Boolean).map((l) => l.trim().split(/\s+/)[0]);
  expect(steps).toEqual(["probe", "archive", "transfer", "verify", "record"]);
  expect(f.out().trim()).toMatch(new RegExp(`^snapshot ${id}: 2000 files, 60\\.0 MB → .* Restore it: npx snapflow restore --snapshot ${id} --sandbox SANDBOX --path /workspace/app$`));

  const started = snapflow("restore", "--snapshot", id, "--sandbox", "follow-dst", "--path", "/workspace/app", "--no-wait");
  expect(await started.exit, started.err()).toBe(0);
  const rid = /^restore (rs-\S+) started/.exec(started.out())![1]!;
  const r = snapflow("status", rid, "-f");
  expect(await r.exit, r.err()).toBe(0);
  expect(r.out().trim()).toMatch(new RegExp(`^restored ${id}: 2000 files, 60\\.0 MB, verified, in \\d`));
}, 180_000);

it("a run that fails ends the following with its failure line and exit 1", async () => {
  await api.generateDataset("follow-fail", { path: "/workspace/app", kind: "node-modules", seed: 7, files: 100, bytes: 2_000_000 });
  const id = await startBackup("follow-fail", "/workspace/app");
  expect(await snapflow("status", id, "--follow").exit).toBe(0);
  // The stored archive damaged in the stack's store (same size, other bytes): the restore's SHA-256 check fails.
  const snap = await api.call<{ archive: { key: string; bytes: number } }>("GET", `/api/snapshots/${id}`);
  const secrets = loadSecrets(dir, () => {});
  const s3 = new AwsClient({ accessKeyId: secrets.s3AccessKeyId, secretAccessKey: secrets.s3SecretAccessKey, region: "auto", service: "s3" });
  const put = await s3.fetch(`${stack.s3Endpoint}/${BUCKET}/${snap.archive.key}`, { method: "PUT", body: new Uint8Array(snap.archive.bytes).fill(7) });
  expect(put.status).toBe(200);
  const started = snapflow("restore", "--snapshot", id, "--sandbox", "follow-fail-dst", "--path", "/workspace/app", "--no-wait");
  expect(await started.exit, started.err()).toBe(0);
  const rid = /^restore (rs-\S+) started/.exec(started.out())![1]!;
  const f = snapflow("status", rid, "--follow");
  expect(await f.exit).toBe(1);
  expect(f.out()).toBe("");
  expect(f.err().trim().split("\n").at(-1)).toMatch(new RegExp(`^snapflow restore: restore ${rid} failed at transfer: \\S`));
  // Without --follow, status reports the same end and exits 0: it answered the question asked.
  const s = snapflow("status", rid);
  expect(await s.exit).toBe(0);
  expect(s.out()).toMatch(/: errored\n/);
}, 240_000);

it("Ctrl-C stops the following, not the run: it says how to follow and cancel it, and the backup completes", async () => {
  await api.generateDataset("follow-int", { path: "/workspace/app", kind: "node-modules", seed: 6, files: 4000, bytes: 150_000_000 });
  const id = await startBackup("follow-int", "/workspace/app");
  const f = snapflow("status", id, "--follow");
  await until(() => f.err().includes("following until it ends"));
  f.child.kill("SIGINT");
  expect(await f.exit).toBe(130);
  expect(f.err()).toContain(`snapflow status: stopped following; backup ${id} goes on.`);
  expect(f.err()).toContain(`follow it:  npx snapflow status ${id} --follow`);
  expect(f.err()).toContain(`cancel it:  npx snapflow cancel ${id}`);
  // The run was left alone: followed again, it completes.
  const again = snapflow("status", id, "--follow");
  expect(await again.exit, again.err()).toBe(0);
  expect(again.out()).toMatch(new RegExp(`^snapshot ${id}: 4000 files`));
}, 180_000);
