// Where snapflow-lazy (native/lazy: the chunker, chunk uploader and lazy FUSE file; the descriptor-relative merge and
// removal every extraction uses) is: on PATH, as the probe reports it (/usr/local/bin in the image; the local stack
// puts native/lazy/bin on the host agent's PATH).
import { AgentError } from "../http/agent-error.ts";
import { findOnPath } from "./find-on-path.ts";
import { startTool } from "./run-tool.ts";

export async function lazyTool(): Promise<string> {
  const bin = await findOnPath("snapflow-lazy");
  if (!bin) throw new AgentError("unavailable", "snapflow-lazy is not installed here (build it with native/lazy/build.sh; the image copies it to /usr/local/bin)");
  return bin;
}

/** Runs a subcommand that answers one JSON line; `input` goes to its stdin (a list too large or too odd for argv). */
export async function runLazyTool<T>(args: string[], input?: Buffer): Promise<T> {
  const tool = startTool([await lazyTool(), ...args], { stdin: input ? "pipe" : "ignore" });
  const out: Buffer[] = [];
  tool.child.stdout!.on("data", (d: Buffer) => out.push(d));
  if (input) {
    tool.child.stdin!.on("error", () => {}); // it died early: its exit says why
    tool.child.stdin!.end(input);
  }
  await tool.done;
  return JSON.parse(Buffer.concat(out).toString().trim()) as T;
}
