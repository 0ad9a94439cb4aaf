// A URL a request names, checked before the agent fetches or sends anything (its own module: the manifest readers and
// the transfers both use it, and neither may import the other).
import { AgentError } from "../http/agent-error.ts";

/** The URL must be http(s); anything else (file:, data:) would let a caller read or write where it should not. */
export function checkUrl(url: string, field: string): URL {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new AgentError("bad_request", `${field} is not a URL`, field);
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") throw new AgentError("bad_request", `${field} must be an http(s) URL`, field);
  return u;
}
