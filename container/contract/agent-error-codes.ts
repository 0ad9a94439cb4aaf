// The agent's error codes and their HTTP statuses: part of the contract, because the Worker branches on them
// (src/sandbox/agent-client.ts AgentCallError.code) and the agent answers with them (http/agent-error.ts). An
// answer is {error: {code, message, field?}}.
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

export const AGENT_ERROR_STATUS: Record<AgentErrorCode, number> = {
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

