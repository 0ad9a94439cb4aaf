// A presigned URL's query string is its signature: error messages lose it before they are persisted or answered.
import { expect, it } from "vitest";
import { AgentError } from "../../container/http/agent-error.ts";
import { redactUrls } from "../../container/contract/redact-url.ts";

const signed = "https://acct.r2.cloudflarestorage.com/bucket/snapshots/bk-1/archive.tar.zst?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIA%2F20260101&X-Amz-Signature=deadbeef";

it("strips every http(s) URL's query string and keeps the rest of the message", () => {
  expect(redactUrls(`presigned GET ${signed} failed: ECONNRESET; retry ${signed}`)).toBe(
    "presigned GET https://acct.r2.cloudflarestorage.com/bucket/snapshots/bk-1/archive.tar.zst?<redacted> failed: ECONNRESET; retry https://acct.r2.cloudflarestorage.com/bucket/snapshots/bk-1/archive.tar.zst?<redacted>",
  );
  expect(redactUrls("no url here: /workspace/a?b")).toBe("no url here: /workspace/a?b");
});

it("an AgentError never carries a signature, whoever built its message", () => {
  const e = new AgentError("tool_failed", `aria2c said: ${signed}: 403`);
  expect(e.message).not.toMatch(/Signature|Credential/);
  expect(JSON.stringify(e.toJSON())).not.toContain("deadbeef");
});
