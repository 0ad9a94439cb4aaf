// Errors the agent answers with. Each has a stable code, an HTTP status and, where a request field is at
// fault, that field's name, so the Worker (and a person reading a log) knows what to change.
import { redactUrls } from "../contract/redact-url.ts";

import { AGENT_ERROR_STATUS, type AgentErrorCode } from "../contract/agent-error-codes.ts";

export type { AgentErrorCode };

export class AgentError extends Error {
  readonly code: AgentErrorCode;
  readonly field: string | undefined;
  readonly status: number;
  constructor(code: AgentErrorCode, message: string, field?: string) {
    // A tool's or fetch's message can quote a presigned URL: never let its signature travel on.
    super(redactUrls(message));
    this.code = code;
    this.field = field;
    this.status = AGENT_ERROR_STATUS[code];
  }
  toJSON() {
    return { error: { code: this.code, message: this.message, ...(this.field ? { field: this.field } : {}) } };
  }
}

/**
 * For code around a tool or a transfer: an error it did not classify (a broken pipe, a reset connection) is that
 * tool's or transfer's failure, reported as tool_failed under `what`. AgentErrors pass through unchanged.
 */
export function toolFailure(what: string, e: unknown): AgentError {
  return e instanceof AgentError ? e : new AgentError("tool_failed", `${what}: ${e instanceof Error ? e.message : String(e)}`);
}

/** What the server answers for anything thrown: AgentErrors as they are, anything else is a bug (internal_error). */
export function asAgentError(e: unknown): AgentError {
  return e instanceof AgentError ? e : new AgentError("internal_error", e instanceof Error ? e.message : String(e));
}

/** A tool's "No space left on device" or an ENOSPC errno, anywhere in the error: the disk is full. */
export function isNoSpace(e: unknown): boolean {
  if ((e as NodeJS.ErrnoException | undefined)?.code === "ENOSPC") return true;
  const message = e instanceof Error ? e.message : String(e);
  return /ENOSPC|No space left on device/.test(message);
}
