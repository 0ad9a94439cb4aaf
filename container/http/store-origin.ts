// The agent fetches only the configured object store: every URL a request names (presigned GET/PUT, part URLs)
// must have an origin the agent was started with (SNAPFLOW_AGENT_STORE_ORIGIN: the store's endpoint; a
// comma-separated list when one store answers on several). Otherwise a token holder could
// make the sandbox fetch or upload to anywhere it can reach (cloud metadata, the host's loopback services).
import { AgentError } from "./agent-error.ts";

/** The origin (scheme://host:port) of a configured store endpoint; throws naming `name` when it is not http(s). */
export function storeOriginOf(endpoint: string, name: string): string {
  let u: URL;
  try {
    u = new URL(endpoint);
  } catch {
    throw new Error(`${name} is not a URL: '${endpoint}'`);
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") throw new Error(`${name} must be an http(s) URL`);
  return u.origin;
}

/** Refuses (400, naming `field`) a URL that is not on the store's origin. The URL itself is not echoed: it may be signed. */
export function checkStoreUrl(url: unknown, field: string, origins: readonly string[]): string {
  if (typeof url !== "string") throw new AgentError("bad_request", `${field} is required`, field);
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new AgentError("bad_request", `${field} is not a URL`, field);
  }
  if (!origins.includes(u.origin)) throw new AgentError("bad_request", `${field} must be on the object store's origin (${origins.join(", ")}), not ${u.origin}`, field);
  return url;
}
