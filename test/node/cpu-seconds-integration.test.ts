// The peers race bills CPU-seconds to each part of the stack (scripts/bench/peers/stack-cpu.ts over
// scripts/stack/cpu-seconds.ts). Real process trees that burn known CPU stand in for the parts' shapes — an agent with
// a short-lived child it reaps and a long-lived one (a FUSE helper) that reaps one of its own, wrangler dev with a
// workerd below it, a store,
// a command the race runs itself — and each process reports its own CPU as the kernel counts it for it
// (getrusage), which /proc must agree with, part by part, within the clock tick's rounding and a process's exit.
import { spawn, type ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import { stackCpuMeter } from "../../scripts/bench/peers/stack-cpu.ts";

const BURNER = join(import.meta.dirname, "../fixtures/cpu-burner.mjs");
/** 10 ms ticks on two readings for one or two processes, and what a short-lived process spends exiting */
const TOLERANCE = 0.06;

type Report = { own: number; short?: number; long?: number; longShort?: number };
const started: ChildProcess[] = [];
afterEach(() => started.splice(0).forEach((c) => c.kill("SIGKILL")));

function burner(...args: string[]) {
  const child = spawn(process.execPath, [BURNER, ...args], { stdio: ["pipe", "pipe", "inherit"] });
  started.push(child);
  const it = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  return {
    pid: child.pid!,
    child,
    next: async (): Promise<Report> => JSON.parse((await it.next()).value as string) as Report,
    go: () => child.stdin!.write("go\n"),
  };
}

it("each part is billed what its processes burned in the span: the agent's own, its reaped and live children, workerd apart from wrangler, the store, the race's own commands", async () => {
  const agent = burner("parent", "snapflow-lazy");
  const wrangler = burner("parent", "workerd");
  const store = burner("long");
  const [a0, w0, s0] = await Promise.all([agent.next(), wrangler.next(), store.next()]);

  const meter = stackCpuMeter(() => ({ agent: agent.pid, wrangler: wrangler.pid, store: store.pid }));
  // A command the race runs itself, to its end: this process reaps it.
  const command = burner("short");
  const [c] = await Promise.all([command.next(), new Promise((r) => command.child.once("exit", r))]);
  [agent, wrangler, store].forEach((p) => p.go());
  const [a1, w1, s1] = await Promise.all([agent.next(), wrangler.next(), store.next()]);
  const cpu = meter.since();

  expect(cpu).toBeDefined();
  const expected = {
    agent: a1.own - a0.own,
    engine: a1.short! + (a1.long! - a0.long!) + a1.longShort!,
    worker: w1.long! - w0.long! + w1.longShort!,
    wrangler: w1.own - w0.own + w1.short!,
    store: s1.own - s0.own + s1.short!,
    commands: c!.own,
  };
  for (const [part, seconds] of Object.entries(expected)) {
    expect.soft(Math.abs(cpu![part as keyof typeof expected] - seconds), `${part}: measured ${cpu![part as keyof typeof expected]} s, burned ${seconds.toFixed(3)} s`).toBeLessThan(TOLERANCE);
  }
  // The total is the stack as production runs it: wrangler dev's own Node process is shown apart, not added in.
  const parts = Object.keys(expected).filter((k) => k !== "wrangler").reduce((s, k) => s + cpu![k as keyof typeof expected], 0);
  expect(Math.abs(cpu!.total - parts)).toBeLessThan(0.005);
});

it("a part restarted in the span (its pid changed) has no figure rather than a wrong one", async () => {
  const agent = burner("long");
  const store = burner("long");
  const restarted = burner("long");
  await Promise.all([agent.next(), store.next(), restarted.next()]);
  let storePid = store.pid;
  const meter = stackCpuMeter(() => ({ agent: agent.pid, wrangler: agent.pid, store: storePid }));
  storePid = restarted.pid;
  expect(meter.since()).toBeUndefined();
});
