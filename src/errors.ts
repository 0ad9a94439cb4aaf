// The Worker's error vocabulary: one registry of codes, each with its HTTP status and whether a retry can help.
// The API answers every error as {error: {code, message, field?}}; Workflow steps ask isPermanent(e) — the one
// retry decision — and stop at once (NonRetryableError) when it says so. The agent has its own registry
// (container/http/agent-error.ts); its codes reach us inside AgentCallError and keep their meaning.
import { redactUrls } from "../container/contract/redact-url.ts";
import { AgentCallError } from "./sandbox/agent-client.ts";
import { StoreError } from "./store/object-store.ts";

export const ERROR_CODES = {
  bad_request: { status: 400, permanent: true }, // a field is missing or malformed (the field is named)
  unauthorized: { status: 401, permanent: true },
  not_found: { status: 404, permanent: true }, // no such route, run, matrix or snapshot; no backup source (path or sandbox named)
  method_not_allowed: { status: 405, permanent: true },
  strategy_unavailable: { status: 422, permanent: true }, // the sandbox lacks a tool or capability the strategy needs
  snapshot_unusable: { status: 422, permanent: true }, // a snapshot's parts are missing, of the wrong kind, or do not match
  target_not_empty: { status: 409, permanent: true }, // a restore target holds files and `replace` was not asked for
  snapshot_in_use: { status: 409, permanent: true },
  run_ended: { status: 409, permanent: true }, // a cancel asked of a run that has already ended (how it ended is named)
  target_busy: { status: 409, permanent: true }, // another backup or restore of the same sandbox path is running (named) // deltas build on the snapshot, or a restore is reading it (named)
  manifest_too_large: { status: 413, permanent: true }, // a backup's manifest passes MAX_MANIFEST_BYTES or MAX_MANIFEST_ENTRIES (figures named)
  insufficient_space: { status: 507, permanent: true }, // the sandbox's disk cannot hold what the run must write (path and shortfall named)
  part_rule: { status: 500, permanent: true }, // an upload would break R2's multipart rules (our bug, not the store's)
  unbound_write: { status: 500, permanent: true }, // a write URL or store key would be built from unchecked parts (our bug: refused, never signed)
  transfer_damaged: { status: 502, permanent: false }, // bytes arrived with the wrong size or SHA-256: fetch again
  config_error: { status: 500, permanent: true }, // the deployment is misconfigured (the variable is named)
  agent_error: { status: 502, permanent: false }, // the agent answered 5xx or could not be reached
  store_error: { status: 502, permanent: false }, // the object store failed (transient unless it says otherwise)
  internal_error: { status: 500, permanent: false }, // a bug: nothing above describes it
} as const satisfies Record<string, { status: number; permanent: boolean }>;

export type ErrorCode = keyof typeof ERROR_CODES;

export class SnapflowError extends Error {
  readonly code: ErrorCode;
  readonly field: string | undefined;
  constructor(code: ErrorCode, message: string, options: { field?: string; cause?: unknown } = {}) {
    // Messages are persisted in run records: a presigned URL quoted in one loses its signature (redact-url.ts).
    super(redactUrls(message), options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.field = options.field;
  }
  get status(): number {
    return ERROR_CODES[this.code].status;
  }
  toJSON() {
    return { error: { code: this.code, message: this.message, ...(this.field ? { field: this.field } : {}) } };
  }
}

/** The single retry decision: true when trying the same thing again cannot succeed. */
export function isPermanent(e: unknown): boolean {
  if (e instanceof SnapflowError) return ERROR_CODES[e.code].permanent;
  if (e instanceof AgentCallError) return e.permanent;
  if (e instanceof StoreError) return e.kind !== "transient";
  return false;
}

/** Any thrown value as a SnapflowError with the closest code, keeping the original as its cause. */
export function asSnapflowError(e: unknown): SnapflowError {
  if (e instanceof SnapflowError) return e;
  if (e instanceof AgentCallError) {
    // An agent's 4xx is the caller's problem (a bad path, a missing directory): pass it on with its field.
    const code: ErrorCode = e.status === 404 ? "not_found" : e.status === 507 ? "insufficient_space" : e.permanent && e.status !== 401 ? "bad_request" : "agent_error";
    return new SnapflowError(code, e.message, { field: e.field, cause: e });
  }
  if (e instanceof StoreError) return new SnapflowError("store_error", e.message, { cause: e });
  return new SnapflowError("internal_error", `internal error: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
}

export function errorMessage(e: unknown): string {
  // What run records persist: no presigned URL's signature, whatever threw.
  return redactUrls(e instanceof Error ? e.message : String(e));
}
