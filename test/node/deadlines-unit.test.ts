// The numbers behind the Worker's deadlines on the agent (src/sandbox/agent-deadlines.ts), the presigned part URLs'
// fitted expiries (src/backup/transfer/presigned-multipart.ts) and the agent's reading of an expired URL
// (container/transfer/presigned-http.ts): pure functions, checked against the cases that matter.
import { describe, expect, it } from "vitest";
import { expiredUrlError } from "../../container/transfer/presigned-http.ts";
import { partUrlExpirySeconds } from "../../src/backup/transfer/presigned-multipart.ts";
import { AGENT_DEADLINE_DEFAULTS, agentDeadlinesFrom, AgentDeadlineVars, deadlineFor, DEFAULT_AGENT_DEADLINES } from "../../src/sandbox/agent-deadlines.ts";

describe("agent deadlines", () => {
  it("defaults: 60 s for a short call, 60 s of silence, 30 minutes for a long call of unknown size", () => {
    expect(AGENT_DEADLINE_DEFAULTS).toEqual({ AGENT_CALL_SECONDS: 60, AGENT_IDLE_SECONDS: 60, AGENT_LONG_CALL_SECONDS: 1800 });
    expect(DEFAULT_AGENT_DEADLINES).toEqual({ callMs: 60_000, idleMs: 60_000, longMs: 1_800_000 });
  });

  it("vars override the defaults (strings, as Worker vars are) and nonsense is refused", () => {
    expect(agentDeadlinesFrom(AgentDeadlineVars.parse({ AGENT_CALL_SECONDS: "15", AGENT_IDLE_SECONDS: "8" }))).toEqual({ callMs: 15_000, idleMs: 8000, longMs: 1_800_000 });
    expect(AgentDeadlineVars.safeParse({ AGENT_IDLE_SECONDS: "0" }).success).toBe(false);
    expect(AgentDeadlineVars.safeParse({ AGENT_CALL_SECONDS: "soon" }).success).toBe(false);
  });

  it("a short call is bounded in total; a streamed one by silence within the long bound; a long one by its size when known", () => {
    const d = { callMs: 15_000, idleMs: 8000, longMs: 1_800_000 };
    expect(deadlineFor("short", d)).toEqual({ totalMs: 15_000, totalVar: "AGENT_CALL_SECONDS" });
    expect(deadlineFor("stream", d)).toEqual({ totalMs: 1_800_000, idleMs: 8000, totalVar: "AGENT_LONG_CALL_SECONDS" });
    expect(deadlineFor({ long: {} }, d)).toEqual({ totalMs: 1_800_000, totalVar: "AGENT_LONG_CALL_SECONDS" });
    // 60 s plus 100 MB at 1 MB/s
    expect(deadlineFor({ long: { bytes: 100e6 } }, d).totalMs).toBe(160_000);
    // a wait that the caller bounds itself gets its own time on top
    expect(deadlineFor({ long: { extraMs: 5000 } }, d).totalMs).toBe(1_805_000);
  });
});

describe("presigned part URLs", () => {
  it("part n's URL lives a minute plus the parts before it at 2 MB/s", () => {
    const MiB = 2 ** 20;
    expect(partUrlExpirySeconds(1, 8 * MiB)).toBe(60);
    expect(partUrlExpirySeconds(2, 8 * MiB)).toBe(60 + Math.ceil((8 * MiB) / 2e6));
    expect(partUrlExpirySeconds(101, 8 * MiB)).toBe(60 + Math.ceil((100 * 8 * MiB) / 2e6));
  });

  it("the store's 403 'Request has expired' is url_expired (not retried with the same URL); other 403s are not", () => {
    const expired = expiredUrlError("presigned PUT of part 2", 403, "<Error><Code>AccessDenied</Code><Message>Request has expired</Message></Error>");
    expect(expired).toMatchObject({ code: "url_expired", status: 502, retryable: false });
    expect(expired!.message).toBe("presigned PUT of part 2: presigned URL expired before it was used (HTTP 403 AccessDenied: Request has expired); a retry signs fresh URLs");
    expect(expiredUrlError("x", 403, "<Error><Code>SignatureDoesNotMatch</Code><Message>The request signature we calculated does not match</Message></Error>")).toBeUndefined();
    expect(expiredUrlError("x", 500, "<Error><Code>InternalError</Code><Message>Request has expired</Message></Error>")).toBeUndefined();
  });
});
