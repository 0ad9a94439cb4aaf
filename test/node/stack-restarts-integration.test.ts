// Stopping the local stack and starting it again at once (issue 26): a stop returns only when every process it
// started has exited, so the next start finds its ports and the store's data free. Ten stops and starts in a row on
// one state directory, as `npm run dev` after Ctrl-C would; then a start while the last store's weed is still
// shutting down (SIGTERMed, its parent gone), which used to fail with weed's "resource temporarily unavailable" on
// its data lock. And a stack whose Node process is SIGKILLed takes its processes with it (their death signal).
import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, expect, it } from "vitest";
import { startObjectStore, type ObjectStoreServer } from "../../scripts/stack/object-store-server.ts";
import { BUCKET, freePort, startStack, type Stack } from "../../scripts/stack/stack.ts";

const dir = mkdtempSync(join(tmpdir(), "snapflow-restarts-"));
const leftOver: (Stack | ObjectStoreServer)[] = [];
afterAll(async () => {
  for (const s of leftOver) await s.stop().catch(() => {});
  rmSync(dir, { recursive: true, force: true });
});

/** Whether any process of the group is left (process.kill(-pgid, 0) fails with ESRCH once the group is empty). */
function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

it("stopped and started ten times in a row on the same state: every start answers, every stop leaves no process", { timeout: 600_000 }, async () => {
  const port = await freePort();
  const lines: string[] = [];
  for (let round = 1; round <= 10; round++) {
    const stack = await startStack({ port, privateDir: join(dir, "stack"), log: (l) => lines.push(`${round}: ${l}`) }).catch((e: Error) => {
      throw new Error(`start ${round} failed: ${e.message}\n${lines.slice(-20).join("\n")}`);
    });
    leftOver.push(stack);
    const health = await fetch(`${stack.apiUrl}/healthz`);
    expect(health.ok, `start ${round}: /healthz answered ${health.status}`).toBe(true);
    await health.body?.cancel();
    const groups = { wrangler: stack.wranglerPid, agent: stack.parts.agent().child.pid!, store: stack.parts.store().pid };
    await stack.stop();
    leftOver.pop();
    expect(Object.entries(groups).filter(([, pgid]) => groupAlive(pgid)).map(([name]) => name), `after stop ${round}`).toEqual([]);
  }
});

it("a store started while the last one's weed is still shutting down waits for it, then serves", { timeout: 120_000 }, async () => {
  const storeDir = join(dir, "s3");
  const lines: string[] = [];
  const first = await startObjectStore({ dir: storeDir, bucket: BUCKET, log: (l) => lines.push(l) });
  // What a stack whose Node process died leaves: weed told to go (its death signal) and nobody waiting for it.
  process.kill(-first.pid, "SIGTERM");
  const second = await startObjectStore({ dir: storeDir, bucket: BUCKET, log: (l) => lines.push(l) });
  leftOver.push(second);
  expect(groupAlive(first.pid), "the first weed is gone").toBe(false);
  const health = await fetch(`${second.endpoint}/healthz`);
  expect(health.ok).toBe(true);
  await health.body?.cancel();
  expect(lines.join("\n")).toMatch(/still running; waiting|still locked/);
  await second.stop();
  leftOver.pop();
});

it("a stack whose Node process is killed outright leaves no process behind", { timeout: 120_000 }, async () => {
  const node = process.execPath;
  const child = spawn(node, [join(import.meta.dirname, "../fixtures/stack-until-killed.ts"), join(dir, "killed")], { stdio: ["ignore", "pipe", "inherit"] });
  let out = "";
  child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
  while (!out.includes("\n")) {
    if (child.exitCode !== null) throw new Error(`the stack did not start (exit ${child.exitCode})`);
    await new Promise((r) => setTimeout(r, 100));
  }
  const groups = JSON.parse(out) as Record<string, number>;
  expect(Object.values(groups).every(groupAlive)).toBe(true);
  child.kill("SIGKILL");
  await once(child, "close");
  // wrangler stops workerd and exits on SIGTERM in a second or two; weed in 2–5 s.
  const until = Date.now() + 20_000;
  while (Date.now() < until && Object.values(groups).some(groupAlive)) await new Promise((r) => setTimeout(r, 200));
  const left = Object.entries(groups).filter(([, pgid]) => groupAlive(pgid)).map(([name]) => name);
  for (const [, pgid] of Object.entries(groups)) if (groupAlive(pgid)) process.kill(-pgid, "SIGKILL");
  expect(left, "parts still running 20 s after their stack's Node process was killed").toEqual([]);
});
