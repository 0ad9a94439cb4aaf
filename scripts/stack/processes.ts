// Child processes for the local stack: each in its own process group, so that stopping it stops everything it
// started (wrangler spawns workerd), and a readiness wait that fails with the process's own last words.
import { spawn, type ChildProcess } from "node:child_process";
import { createWriteStream, existsSync } from "node:fs";

export interface Managed {
  name: string;
  child: ChildProcess;
  exited: Promise<number | null>;
  /** the tail of its output, for error messages */
  tail(): string;
  stop(): Promise<void>;
  /** SIGKILL to the whole group at once, no grace: what a crash or a power cut does (tests) */
  kill(): Promise<void>;
}

/**
 * `setpriv --pdeathsig TERM`, when the system has it: the process is told to stop when the Node process that started
 * it dies without stopping it (SIGKILL, a crash). Each process is in its own group, so a terminal's signals reach
 * only that Node process; without this, wrangler (and the workerd under it) and the agent outlived it as orphans.
 */
const SETPRIV = ["/usr/bin/setpriv", "/bin/setpriv"].find((p) => existsSync(p));

export function startManaged(name: string, argv: string[], options: { env?: NodeJS.ProcessEnv; cwd?: string; logFile: string; onLine?: (line: string) => void }): Managed {
  const [cmd, ...args] = SETPRIV ? [SETPRIV, "--pdeathsig", "TERM", "--", ...argv] : argv;
  const child = spawn(cmd!, args, { cwd: options.cwd, env: options.env, detached: true, stdio: ["ignore", "pipe", "pipe"] });
  const log = createWriteStream(options.logFile, { flags: "a" });
  let tail = "";
  let partial = "";
  const onData = (d: Buffer) => {
    log.write(d);
    tail = (tail + d.toString()).slice(-3000);
    if (options.onLine) {
      const lines = (partial + d.toString()).split("\n");
      partial = lines.pop() ?? "";
      lines.forEach(options.onLine);
    }
  };
  child.stdout!.on("data", onData);
  child.stderr!.on("data", onData);
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  let stopping: Promise<void> | undefined;
  const signal = (sig: NodeJS.Signals) => {
    try {
      process.kill(-child.pid!, sig);
    } catch {
      // already gone
    }
  };
  return {
    name,
    child,
    exited,
    tail: () => tail,
    stop: () =>
      (stopping ??= (async () => {
        if (child.exitCode !== null || child.signalCode !== null) return;
        signal("SIGTERM");
        const timer = setTimeout(() => signal("SIGKILL"), 8000);
        await exited;
        clearTimeout(timer);
        signal("SIGKILL"); // anything left in the group (workerd under wrangler)
        await groupGone(child.pid!);
        log.end();
      })()),
    kill: async () => {
      signal("SIGKILL");
      await exited;
      await groupGone(child.pid!);
      log.end();
    },
  };
}

/**
 * Resolves once no process of the group is left (SIGKILLed members take a moment to die): a stop returns only when
 * every process it started has exited, so a start right after it finds its ports and files free.
 */
async function groupGone(pgid: number, timeoutMs = 5000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    try {
      process.kill(-pgid, 0);
    } catch {
      return; // ESRCH: the group is empty
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Polls `check` until it returns true; fails early if the process exits, or after `timeoutMs`. */
export async function waitReady(p: Managed, check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let exited = false;
  void p.exited.then(() => (exited = true));
  while (Date.now() < deadline) {
    if (exited) throw new Error(`${p.name} exited during start-up:\n${p.tail()}`);
    if (await check().catch(() => false)) return;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`${p.name} was not ready after ${timeoutMs / 1000} s:\n${p.tail()}`);
}
