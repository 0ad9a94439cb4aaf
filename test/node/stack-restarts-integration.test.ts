// Stopping the local stack and starting it again at once (issue 26): a stop returns only when every process it
// started has exited, so the next start finds its ports and the store's data free. Ten stops and starts in a row on
// one state directory, as `npm run dev` after Ctrl-C would; then a start while the last store's weed is still
// shutting down (SIGTERMed, its parent gone), which used to fail with weed's "resource temporarily unavailable" on
// its data lock.
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
