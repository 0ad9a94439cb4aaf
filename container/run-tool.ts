// Runs an external tool with its stdin/stdout as Node streams and turns a non-zero exit into an AgentError
// that carries the tail of stderr, which is where tar and friends say what went wrong.
import { spawn, type ChildProcess } from "node:child_process";
import { AgentError, toolFailure } from "./agent-error.ts";

export interface RunningTool {
  /** the command's name, for messages */
  name: string;
  child: ChildProcess;
  /** resolves when the tool exits 0, rejects with a tool_failed AgentError otherwise */
  done: Promise<void>;
}

const STDERR_TAIL = 4000;

export function startTool(argv: string[], options: { stdin?: "pipe" | "ignore"; stdout?: "pipe" | "ignore"; cwd?: string } = {}): RunningTool {
  const [cmd, ...args] = argv;
  const child = spawn(cmd!, args, { stdio: [options.stdin ?? "ignore", options.stdout ?? "pipe", "pipe"], cwd: options.cwd });
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
