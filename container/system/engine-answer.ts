// What the native engine (snapflow-lazy) answers on a descriptor of its own, read the same way by each of its callers
// (engine-pass.ts, engine-parts.ts, engine-unpack.ts, engine-files-unpack.ts, manifest-from-index.ts, tree-size.ts):
// the whole text, then JSON that may not parse; askEngine runs the commands whose request is one line on stdin.
import { z } from "zod";
import type { AgentErrorCode } from "../contract/agent-error-codes.ts";
import { AgentError } from "../http/agent-error.ts";
import { startTool } from "./run-tool.ts";

/** The stream's whole text. Awaited to its end, not to the process's exit: under Bun, fd 3's data can come later. */
export async function readAll(stream: NodeJS.ReadableStream): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

/** The parsed value, or undefined for text that is not JSON (the caller's schema then says what was wrong). */
export function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** The codes an engine command's error answer carries: they are the agent's own. */
const ANSWER_CODES = ["bad_request", "path_outside_root", "not_found", "tool_failed", "no_space", "verify_failed"] as const satisfies readonly AgentErrorCode[];
const Failure = z.object({ error: z.object({ code: z.enum(ANSWER_CODES), message: z.string(), field: z.string().optional() }) });
export type EngineFailure = z.infer<typeof Failure>["error"];

/**
 * Runs an engine command that takes its request as one JSON line on stdin and answers on fd 3 (unpack, files-unpack,
 * files-manifest; URLs travel in the line, never in argv): its result, parsed by `result`; its error answer thrown
 * as the AgentError it names (`failed` may reword it); a binary without the command — its usage and exit 2, nothing
 * on fd 3 — thrown as `lacking()`.
 */
export async function askEngine<T extends z.ZodType>(argv: string[], line: object, o: { result: T; lacking: () => Error; failed?: (f: EngineFailure) => AgentError }): Promise<z.infer<T>> {
  const tool = startTool(argv, { stdin: "pipe", stdout: "ignore", fd3: "pipe" });
  tool.child.stdin!.on("error", () => {}); // it died early: its exit says why
  tool.child.stdin!.end(`${JSON.stringify(line)}\n`);
  // Awaited to its end, not to the exit: under Bun, fd 3's data can arrive after the child's 'close' event.
  const [exited, said] = await Promise.allSettled([tool.done, readAll(tool.child.stdio[3] as NodeJS.ReadableStream)]);
  const text = said.status === "fulfilled" ? said.value.trim() : "";
  const failure = text ? Failure.safeParse(safeJson(text)) : undefined;
  if (failure?.success) throw o.failed ? o.failed(failure.data.error) : new AgentError(failure.data.error.code, failure.data.error.message, failure.data.error.field);
  if (exited.status === "rejected" && tool.child.exitCode === 2 && !text) throw o.lacking();
  if (exited.status === "rejected") throw exited.reason;
  const parsed = o.result.safeParse(safeJson(text));
  if (!parsed.success) throw new AgentError("tool_failed", `snapflow-lazy ${argv[1]} answered what is not a result: ${text.slice(0, 200)}`);
  return parsed.data;
}
