// Signed links to the results page: a browser cannot send a bearer header on navigation, and the API token in a
// URL ends up in history, proxy logs and shared links. A link names one matrix and an expiry and carries
// HMAC-SHA256(key, "results-page\n" + id + "\n" + exp); it grants reading that page until then, nothing else.
// The key is derived from API_TOKEN (with its own label, so a link's MAC is never a valid MAC of anything else
// snapflow signs); rotating API_TOKEN revokes every link.
import { SnapflowError } from "../errors.ts";

/** How long a link lives when the caller does not say; at most MAX. */
export const RESULTS_LINK_TTL_SECONDS = { default: 7 * 24 * 3600, max: 30 * 24 * 3600 } as const;

const enc = new TextEncoder();

async function mac(secret: string, matrixId: string, exp: number): Promise<Uint8Array> {
  const key = await crypto.subtle.importKey("raw", enc.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  return new Uint8Array(await crypto.subtle.sign("HMAC", key, enc.encode(`results-page\n${matrixId}\n${exp}`)));
}

const b64url = (b: Uint8Array) => btoa(String.fromCharCode(...b)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");

/** The page's path and query for `matrixId`, valid until `exp` (unix seconds). */
export async function signResultsLink(secret: string, matrixId: string, exp: number): Promise<string> {
  return `/matrices/${matrixId}?exp=${exp}&sig=${b64url(await mac(secret, matrixId, exp))}`;
}

/** Refuses (401, naming the field) a link that is not signed for this matrix or has expired. */
export async function checkResultsLink(secret: string, matrixId: string, query: URLSearchParams, nowSeconds: number): Promise<void> {
  const expText = query.get("exp") ?? "";
  const sig = query.get("sig") ?? "";
  const refuse = (field: string, why: string) => {
    throw new SnapflowError("unauthorized", `${field}: ${why}; ask for a new link with POST /api/matrices/${matrixId}/link (or npx snapflow bench prints one)`, { field });
  };
  if (!/^\d{1,12}$/.test(expText)) refuse("exp", "the results link has no expiry");
  const exp = Number(expText);
  const want = enc.encode(b64url(await mac(secret, matrixId, exp)));
  const got = enc.encode(sig);
  if (got.byteLength !== want.byteLength || !crypto.subtle.timingSafeEqual(got, want)) refuse("sig", "the results link's signature does not match");
  if (exp < nowSeconds) refuse("exp", "the results link has expired");
}

/** Headers for the page: nothing leaks through Referer, nothing is cached, only our own nonce'd inline code runs. */
export function resultsPageHeaders(nonce: string): Record<string, string> {
  return {
    "content-type": "text/html; charset=utf-8",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
    "x-content-type-options": "nosniff",
    "content-security-policy": `default-src 'none'; script-src 'nonce-${nonce}'; style-src 'nonce-${nonce}'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'`,
  };
}
