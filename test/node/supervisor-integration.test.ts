// The stack's supervisor (scripts/stack/supervisor.ts) with real processes: a part that dies is started again and
// logged; one that keeps dying is given up after the bound, with a message naming it and its last output, so that
// `npm run dev` stops everything instead of looping.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, expect, it } from "vitest";
import { startManaged } from "../../scripts/stack/processes.ts";
import { supervise } from "../../scripts/stack/supervisor.ts";

const dir = mkdtempSync(join(tmpdir(), "snapflow-supervisor-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const crasher = () => Promise.resolve(startManaged("crasher", ["sh", "-c", "echo 'disk on fire'; exit 3"], { logFile: join(dir, "crasher.log") }));

it("a part that keeps exiting is restarted up to the bound, then given up, naming it and its last words", async () => {
  const lines: string[] = [];
  const s = supervise("crasher", await crasher(), crasher, { log: (l) => lines.push(l), maxRestarts: 3, windowMs: 60_000 });
  const why = await Promise.race([s.gaveUp, new Promise<string>((_, rej) => setTimeout(() => rej(new Error("never gave up")), 20_000))]);
  expect(why).toMatch(/^crasher exited \(code 3\): 4 exits within 60 s; not restarting it again\. Its last output:\ndisk on fire/);
  expect(s.restarts()).toBe(3);
  expect(lines.filter((l) => /restarting it \(\d of at most 3 in 60 s\)/.test(l))).toHaveLength(3);
});

it("a part SIGKILLed is started again, and a stopped supervisor restarts nothing", async () => {
  const sleeper = () => Promise.resolve(startManaged("sleeper", ["sleep", "60"], { logFile: join(dir, "sleeper.log") }));
  const s = supervise("sleeper", await sleeper(), sleeper, { log: () => {} });
  const first = s.current();
  await first.kill();
  for (let i = 0; s.restarts() === 0 && i < 100; i++) await new Promise((r) => setTimeout(r, 50));
  expect(s.restarts()).toBe(1);
  expect(s.current().child.pid).not.toBe(first.child.pid);
  await s.stop();
  await new Promise((r) => setTimeout(r, 300));
  expect(s.restarts()).toBe(1);
  expect(s.current().child.exitCode !== null || s.current().child.signalCode !== null).toBe(true);
});

it("without restarts (restart: false) the first exit is final", async () => {
  const s = supervise("crasher", await crasher(), crasher, { log: () => {}, restart: false });
  expect(await s.gaveUp).toBe("crasher exited (code 3) unexpectedly");
  expect(s.restarts()).toBe(0);
});
