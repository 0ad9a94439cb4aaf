// How long the Worker waits for the agent, per call, so that a wedged agent (or a connection that went quiet) fails
// an attempt in seconds and the step's retry takes over, instead of holding the step until its own 30–60 minute
// timeout. Three kinds of call, three bounds, and their defaults live here only:
//
//   short   probe, stat, space, swap plan/in/commit/rollback, mounts, selection, faults: a fixed bound on the whole
//           call (AGENT_CALL_SECONDS, default 60 s). A commit or rollback removes a tree; one so large that its
//           removal outlasts the bound fails the attempt, and the retry finishes the removal (rm is idempotent).
//   stream  archive, extract, manifest, verify, delta, file read/write: bytes flow between Worker and agent, so the
//           bound is on *silence* (AGENT_IDLE_SECONDS, default 60 s, like the agent's own store deadline): no byte
//           from the agent while we wait for one, or the agent not taking the next byte we offer. Time spent
//           waiting on someone else (the store feeding the request body, a slow consumer of the response) is not
//           the agent's silence and does not count. Plus the long bound on the whole call. An answer of known
//           size (a file read) is bounded as a whole instead: silence bound + its size at 1 MB/s (deadline-fetch.ts).
//   long    work done inside the agent that answers once, at the end (archive to a file, make an image, the
//           presigned uploads and downloads, verify a tree): no byte flows until the answer, so silence says
//           nothing; the bound is total time: 60 s plus the work's size at 1 MB/s when the caller knows the size,
//           else AGENT_LONG_CALL_SECONDS (default 1800 s, under the transfer step's 60-minute timeout).
//
// A bound that is hit aborts the fetch and both bodies (deadline-fetch.ts) and throws AgentCallError code
// `agent_timeout` (504: transient, so the step retries), naming the call, the sandbox and the bound.
import { z } from "zod";

export interface AgentDeadlines {
  /** short calls: the whole call */
  callMs: number;
  /** streamed calls: the agent's silence */
  idleMs: number;
  /** long calls of unknown size, and the outer bound of streamed calls */
  longMs: number;
}

/** The production defaults (seconds), overridable by the Worker vars of the same names (config.ts). */
export const AGENT_DEADLINE_DEFAULTS = { AGENT_CALL_SECONDS: 60, AGENT_IDLE_SECONDS: 60, AGENT_LONG_CALL_SECONDS: 1800 } as const;

/** The vars, for config.ts's schema: whole seconds, at least 1. */
export const AgentDeadlineVars = z.object({
  AGENT_CALL_SECONDS: z.coerce.number().int().min(1).default(AGENT_DEADLINE_DEFAULTS.AGENT_CALL_SECONDS),
  AGENT_IDLE_SECONDS: z.coerce.number().int().min(1).default(AGENT_DEADLINE_DEFAULTS.AGENT_IDLE_SECONDS),
  AGENT_LONG_CALL_SECONDS: z.coerce.number().int().min(1).default(AGENT_DEADLINE_DEFAULTS.AGENT_LONG_CALL_SECONDS),
});

export function agentDeadlinesFrom(vars: z.infer<typeof AgentDeadlineVars>): AgentDeadlines {
  return { callMs: vars.AGENT_CALL_SECONDS * 1000, idleMs: vars.AGENT_IDLE_SECONDS * 1000, longMs: vars.AGENT_LONG_CALL_SECONDS * 1000 };
}

export const DEFAULT_AGENT_DEADLINES: AgentDeadlines = agentDeadlinesFrom(AgentDeadlineVars.parse({}));

/** What bounds one call: the whole call (totalMs), and for streamed calls also the agent's silence (idleMs). */
export interface Deadline {
  totalMs: number;
  idleMs?: number;
  /** the var that sets the bound that applies, for the error message */
  totalVar: string;
}

/** The rate below which a long call or an answer of known size is taken to be stuck (generous: a slow disk, a busy sandbox). */
export const SLOWEST_BYTES_PER_SECOND = 1_000_000;

export type CallKind = "short" | "stream" | { long: { bytes?: number; extraMs?: number } };

export function deadlineFor(kind: CallKind, d: AgentDeadlines): Deadline {
  if (kind === "short") return { totalMs: d.callMs, totalVar: "AGENT_CALL_SECONDS" };
  if (kind === "stream") return { totalMs: d.longMs, idleMs: d.idleMs, totalVar: "AGENT_LONG_CALL_SECONDS" };
  const { bytes, extraMs = 0 } = kind.long;
  if (bytes === undefined) return { totalMs: d.longMs + extraMs, totalVar: "AGENT_LONG_CALL_SECONDS" };
  return { totalMs: 60_000 + Math.ceil((bytes / SLOWEST_BYTES_PER_SECOND) * 1000) + extraMs, totalVar: `60 s + ${bytes} bytes at 1 MB/s` };
}
