// `npm start` (scripts/main.ts) leaves nothing behind: run as a process against a private local stack (named by
// SNAPFLOW_URL/SNAPFLOW_TOKEN, as the CLI is), its snapshot is deleted and both sandboxes ended at the end; with
// --keep it says what it kept and where; Ctrl-C mid-backup cancels the run and removes the rest, exit 130.
import { spawn } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { Stack } from "../../scripts/stack/stack.ts";
import { startPrivateStack, type PrivateStack } from "./private-stack.ts";

const MAIN = new URL("../../scripts/main.ts", import.meta.url).pathname;

let stack: Stack;
let dir: string;
let api: PrivateStack["api"];
let running: PrivateStack | undefined;

beforeAll(async () => void ({ stack, dir, api } = running = await startPrivateStack("snapflow-start-")), 120_000);
afterAll(() => running?.stop(), 60_000);

function npmStart(args: string[], onErr?: (err: string, child: ReturnType<typeof spawn>) => void) {
  const child = spawn(process.execPath, [MAIN, ...args], { env: { ...process.env, SNAPFLOW_URL: stack.apiUrl, SNAPFLOW_TOKEN: stack.apiToken } });
  let out = "", err = "";
  child.stdout!.on("data", (b) => (out += b));
  child.stderr!.on("data", (b) => {
    err += b;
    onErr?.(err, child);
  });
  return new Promise<{ code: number | null; out: string; err: string }>((resolve) => child.on("close", (code) => resolve({ code, out, err })));
}

const snapshotIds = async () => (await api.call<{ snapshots: { id: string }[] }>("GET", "/api/snapshots?limit=1000")).snapshots.map((s) => s.id);
const sandboxDirs = () => (existsSync(join(dir, "sandboxes")) ? readdirSync(join(dir, "sandboxes")).filter((d) => d.startsWith("main-")) : []);
const SMALL = ["--files", "300", "--bytes", "3000000"];

it("removes its snapshot and both sandboxes at the end, and says so", async () => {
  const r = await npmStart(SMALL);
  expect(r.code, r.err).toBe(0);
  expect(r.out).toMatch(/restored manifest equals source: 300 files/);
  const id = /^backup (bk-\S+) /m.exec(r.err)![1]!;
  expect(r.err).toMatch(new RegExp(`removed what this job made: snapshot ${id}, sandbox main-src-\\w+, sandbox main-dst-\\w+$`, "m"));
  expect(await snapshotIds()).not.toContain(id);
  expect(sandboxDirs()).toEqual([]);
}, 180_000);

it("with --keep, keeps them and says what it kept and how to remove it", async () => {
  const r = await npmStart([...SMALL, "--keep"]);
  expect(r.code, r.err).toBe(0);
  const id = /^backup (bk-\S+) /m.exec(r.err)![1]!;
  expect(r.err).toMatch(new RegExp(`kept \\(--keep\\): snapshot ${id} \\(npx snapflow delete ${id} removes it\\), sandbox\\(es\\) main-src-\\w+ and main-dst-\\w+`));
  expect(await snapshotIds()).toContain(id);
  expect(sandboxDirs()).toHaveLength(2);
  await api.call("DELETE", `/api/snapshots/${id}`);
  for (const d of sandboxDirs()) await api.destroySandbox(d);
}, 180_000);

it("Ctrl-C mid-backup cancels the backup and removes the rest: no snapshot, no sandbox, exit 130", async () => {
  let sent = false;
  const r = await npmStart(["--files", "4000", "--bytes", "150000000"], (err, child) => {
    if (!sent && /^backup bk-\S+ /m.test(err)) {
      sent = true;
      child.kill("SIGINT");
    }
  });
  expect(r.code, r.err).toBe(130);
  const id = /^backup (bk-\S+) /m.exec(r.err)![1]!;
  expect(r.err).toContain(`interrupted: cancelling ${id}, then removing what this job made`);
  expect(r.err).not.toMatch(/FAILED/);
  expect(r.err).toMatch(new RegExp(`removed what this job made: run ${id} \\(cancelled\\), sandbox main-src-\\w+$`, "m"));
  expect((await api.backup(id)).status).toBe("cancelled");
  expect(await snapshotIds()).not.toContain(id);
  expect(sandboxDirs()).toEqual([]);
}, 180_000);
