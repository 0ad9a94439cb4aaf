// Runs an external tool with its stdin/stdout as Node streams and turns a non-zero exit into an AgentError
// that carries the tail of stderr, which is where tar and friends say what went wrong.
import { spawn, type ChildProcess, type StdioOptions } from "node:child_process";
import { finished, Writable } from "node:stream";
import { AgentError, toolFailure } from "../http/agent-error.ts";

export interface RunningTool {
  /** the command's name, for messages */
  name: string;
  child: ChildProcess;
  /** resolves when the tool exits 0, rejects with a tool_failed AgentError otherwise */
  done: Promise<void>;
}

const STDERR_TAIL = 4000;

/** `fd3`: a fourth pipe (child.stdio[3]), for a tool whose stdout is its data and whose answer comes apart from it. */
export function startTool(argv: string[], options: { stdin?: "pipe" | "ignore"; stdout?: "pipe" | "ignore"; cwd?: string; fd3?: "pipe" } = {}): RunningTool {
  const [cmd, ...args] = argv;
  const stdio: StdioOptions = [options.stdin ?? "ignore", options.stdout ?? "pipe", "pipe", ...(options.fd3 ? ["pipe" as const] : [])];
  const child: ChildProcess = spawn(cmd!, args, { stdio, cwd: options.cwd });
  let stderr = "";
  child.stderr!.on("data", (d: Buffer) => {
    stderr = (stderr + d.toString()).slice(-STDERR_TAIL);
  });
  const done = new Promise<void>((resolve, reject) => {
    child.on("error", (e) => reject(new AgentError("unavailable", `${cmd} could not start: ${e.message}`)));
    child.on("close", (code, signal) => {
      if (code === 0) resolve();
      else reject(new AgentError("tool_failed", `${argv.join(" ")} exited ${code ?? signal}: ${stderr.trim()}`));
    });
  });
  return { name: cmd!, child, done };
}

/** Runs a tool to completion and returns its stdout. For small outputs (versions, probes). */
export async function runTool(argv: string[], timeoutMs = 10_000): Promise<string> {
  const tool = startTool(argv);
  let out = "";
  tool.child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
  const timer = setTimeout(() => tool.child.kill("SIGKILL"), timeoutMs);
  try {
    await tool.done;
  } finally {
    clearTimeout(timer);
  }
  return out;
}

/**
 * Waits for a tool and the stream plumbing around it. When both fail, the tool's error wins: "tar: Unexpected
 * EOF in archive" says more than the EPIPE that the plumbing saw as a consequence. A failure of the plumbing alone
 * (the client hung up, the disk filled) is still this tool's job failing: tool_failed, not a bug.
 */
export async function toolAndFlow(tool: RunningTool, flow: Promise<unknown>): Promise<void> {
  const [t, f] = await Promise.allSettled([tool.done, flow]);
  // Except a tool killed by SIGPIPE: its reader went away first, and why (a full disk: ENOSPC) is the flow's error.
  if (t.status === "rejected" && f.status === "rejected" && tool.child.signalCode === "SIGPIPE") throw toolFailure(`the stream from ${tool.name}`, f.reason);
  if (t.status === "rejected") throw t.reason;
  if (f.status === "rejected") throw toolFailure(`the stream through ${tool.name}`, f.reason);
}

/**
 * A tool's stdin, for a pipeline that must read its whole input (to hash it, or to check every tar header): tar
 * stops reading at the archive's end-of-archive blocks and may exit before the zero padding after them was written,
 * and a write into a pipe nobody reads fails with EPIPE ("Premature close" for the whole pipeline, though nothing
 * went wrong). When the tool closed its end and exited 0, the rest is read and dropped here; when it failed, the
 * write fails at once (a full disk must not wait for the rest of a download).
 */
export function stdinUntilClosed(tool: RunningTool): Writable {
  const stdin = tool.child.stdin!;
  stdin.on("error", () => {}); // each write's callback, and finished(), have it
  const exitCode = () => (tool.child.exitCode !== null || tool.child.signalCode !== null ? Promise.resolve(tool.child.exitCode) : new Promise<number | null>((r) => tool.child.once("exit", (code) => r(code))));
  let dropping = false;
  /** An error from the pipe: the tool's end closed. Fine only once the tool exited 0. */
  const settle = (e: NodeJS.ErrnoException | null | undefined, done: (e?: Error | null) => void) => {
    if (!e) return done();
    if (e.code !== "EPIPE" && e.code !== "ERR_STREAM_DESTROYED" && e.code !== "ERR_STREAM_PREMATURE_CLOSE") return done(e);
    void exitCode().then((code) => {
      dropping = code === 0;
      done(dropping ? null : e);
    });
  };
  return new Writable({
    highWaterMark: 1 << 20,
    write(chunk: Buffer, _enc, done) {
      if (dropping) return done();
      stdin.write(chunk, (e) => settle(e, done));
    },
    final(done) {
      if (dropping) return done();
      stdin.end();
      finished(stdin, (e) => settle(e, done));
    },
    // The pipeline failed upstream (a decompressor's error, a bad tar header): close the tool's input, so that it
    // ends too instead of waiting for more.
    destroy(e, done) {
      stdin.destroy();
      done(e);
    },
  });
}
