// Errors the agent answers with. Each has a stable code, an HTTP status and, where a request field is at
// fault, that field's name, so the Worker (and a person reading a log) knows what to change.

export type AgentErrorCode =
  | "bad_request" // a field is missing or malformed
  | "path_outside_root" // a path escapes the sandbox's allowed roots ('..', absolute escape, symlink escape)
  | "not_found"
  | "unauthorized"
  | "tool_failed" // tar, zstd, ... exited non-zero
  | "unavailable" // a tool or kernel feature this request needs is missing here
  | "injected_fault"; // a test-only fault (see faults.ts)

const STATUS: Record<AgentErrorCode, number> = {
  bad_request: 400,
  path_outside_root: 400,
  not_found: 404,
  unauthorized: 401,
  tool_failed: 500,
  unavailable: 501,
  injected_fault: 503,
};

export class AgentError extends Error {
  readonly code: AgentErrorCode;
  readonly field: string | undefined;
  readonly status: number;
  constructor(code: AgentErrorCode, message: string, field?: string) {
    super(message);
    this.code = code;
    this.field = field;
    this.status = STATUS[code];
  }
  toJSON() {
    return { error: { code: this.code, message: this.message, ...(this.field ? { field: this.field } : {}) } };
  }
}
