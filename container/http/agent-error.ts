// Errors the agent answers with. Each has a stable code, an HTTP status and, where a request field is at
// fault, that field's name, so the Worker (and a person reading a log) knows what to change.
import { redactUrls } from "../contract/redact-url.ts";

export type AgentErrorCode =
  | "bad_request" // a field is missing or malformed
  | "path_outside_root" // a path escapes the sandbox's allowed roots ('..', absolute escape, symlink escape)
  | "not_found"
  | "unauthorized"
  | "tool_failed" // tar, zstd, ... exited non-zero, or the store or pipe around them failed: the world, not us
  | "internal_error" // an exception nobody classified: a bug in the agent
  | "unavailable" // a tool or kernel feature this request needs is missing here
  | "no_space" // the disk the request writes to is full (ENOSPC): permanent, the message names what and how much is free
  | "verify_failed" // restored bytes or tree differ from the snapshot's manifest (the message names the first differences)
  | "store_refused" // the object store refused the bytes for good: not the SHA-256 the URL was signed for, or an overwrite
  | "url_expired" // a presigned URL expired before it was used: the same URL never works again, fresh ones would (so 5xx: the Worker's retry signs anew)
  | "injected_fault"; // a test-only fault (see faults.ts)

const STATUS: Record<AgentErrorCode, number> = {
  bad_request: 400,
  path_outside_root: 400,
  not_found: 404,
  unauthorized: 401,
  tool_failed: 500,
  internal_error: 500,
  unavailable: 501,
  verify_failed: 422,
  store_refused: 422,
  url_expired: 502,
  no_space: 507,
  injected_fault: 503,
};

export class AgentError extends Error {
  readonly code: AgentErrorCode;
  readonly field: string | undefined;
  readonly status: number;
  constructor(code: AgentErrorCode, message: string, field?: string) {
    // A tool's or fetch's message can quote a presigned URL: never let its signature travel on.
    super(redactUrls(message));
    this.code = code;
    this.field = field;
    this.status = STATUS[code];
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
