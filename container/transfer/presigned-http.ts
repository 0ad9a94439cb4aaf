// The HTTP plumbing shared by the presigned transfers (presigned.ts, presigned-multipart.ts, presigned-ranged.ts):
// keep-alive agents, one PUT (of an in-memory part or a file's stream), one ranged GET, and which failures are
// worth a retry. Every request fails after IDLE_TIMEOUT_MS without progress.
//
// node:http / node:https rather than fetch: a part's Content-Length is set explicitly, the connection pool is
// ours (keep-alive, so the many part PUTs and range GETs of one transfer reuse TLS connections), and the same
// code runs under Node and Bun.
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import type { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { AgentError, toolFailure } from "../http/agent-error.ts";
import { describeS3Error } from "../contract/s3-error.ts";

const httpAgent = new HttpAgent({ keepAlive: true, maxSockets: 128 });
const httpsAgent = new HttpsAgent({ keepAlive: true, maxSockets: 128 });

/** A request that makes no progress (no bytes either way) for this long fails, so a stuck store cannot hang us. */
export const IDLE_TIMEOUT_MS = 60_000;

/** An HTTP failure; `retryable` for network errors, 5xx and 429, not for other 4xx (a bad signature stays bad). */
export class TransferError extends AgentError {
  readonly retryable: boolean;
  readonly httpStatus: number | undefined;
  constructor(message: string, retryable: boolean, httpStatus?: number, code: "tool_failed" | "store_refused" | "url_expired" = "tool_failed") {
    super(code, message);
    this.retryable = retryable;
    this.httpStatus = httpStatus;
  }
}

const retryableStatus = (s: number) => s >= 500 || s === 429;

/**
 * The store refusing a presigned URL because its X-Amz-Expires has passed: S3 and SeaweedFS answer 403
 * AccessDenied "Request has expired" (R2 is S3-compatible here; not checked against R2 itself). Trying the same URL
 * again cannot help, fresh URLs would: TransferError url_expired, which the Worker retries by signing again.
 */
export function expiredUrlError(what: string, status: number, body: string): TransferError | undefined {
  if (status !== 403 || !/<Message>[^<]*expired[^<]*<\/Message>|<Code>(ExpiredToken|RequestExpired|TokenRefreshRequired)<\/Code>/i.test(body)) return undefined;
  return new TransferError(`${what}: presigned URL expired before it was used (${describeS3Error(status, body)}); a retry signs fresh URLs`, false, status, "url_expired");
}

/**
 * The store refusing these bytes for good: their SHA-256 is not the one the URL was signed for (BadDigest), or the
 * URL may only create the object and it exists (412 PreconditionFailed). Sending them again, here or from a
 * retried step, gets the same answer: store_refused (a 4xx), which the Worker does not retry.
 */
const refusedForGood = (status: number, body: string) => status === 412 || /<Code>(BadDigest|InvalidDigest|PreconditionFailed|XAmzContentChecksumMismatch)<\/Code>/.test(body);

function send(u: URL) {
  return u.protocol === "https:" ? { request: httpsRequest, agent: httpsAgent } : { request: httpRequest, agent: httpAgent };
}

/** The query string of a presigned URL is a credential: never put it in an error message. */
export function redact(u: URL): string {
  return `${u.origin}${u.pathname}`;
}

/** PUTs an in-memory part and resolves with the response's ETag (quotes stripped); a part without one is useless. */
export async function putBytes(u: URL, body: Uint8Array, what: string): Promise<string> {
  const { status, etag } = await putBody(u, body, body.byteLength, what);
  if (!etag) throw new TransferError(`${what} answered ${status} without an ETag`, false, status);
  return etag;
}

/**
 * PUTs `body` (bytes, or a stream of exactly `length` bytes) with its Content-Length and resolves with the 2xx
 * status and the ETag, if any (quotes stripped). A stream's own failure breaks the request and rejects.
 */
export function putBody(u: URL, body: Uint8Array | Readable, length: number, what: string, headers: Record<string, string> = {}): Promise<{ status: number; etag: string | undefined }> {
  const { request, agent } = send(u);
  return new Promise((resolve, reject) => {
    let settled = false;
    const fail = (e: TransferError) => {
      if (settled) return;
      settled = true;
      req.destroy(); // a connection that broke mid-body must not go back to the pool
      reject(e);
    };
    const req = request(u, { method: "PUT", agent, headers: { ...headers, "content-length": length } }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (d: string) => (text = (text + d).slice(0, 4000)));
      res.on("error", (e) => fail(new TransferError(`${what}: response broke: ${e.message}`, true)));
      res.on("end", () => {
        const status = res.statusCode ?? 0;
        if (status < 200 || status >= 300) {
          const expired = expiredUrlError(what, status, text);
          if (expired) return fail(expired);
          const refused = refusedForGood(status, text);
          return fail(new TransferError(`${what} answered ${describeS3Error(status, text)}`, !refused && retryableStatus(status), status, refused ? "store_refused" : "tool_failed"));
        }
        // A 2xx means the store read the whole body (an ETag is over all of it), so every byte has left this
        // process and the caller may reuse the buffer. (Not req's 'finish': Bun's ClientRequest does not promise it.)
        if (settled) return;
        settled = true;
        resolve({ status, etag: res.headers.etag?.replaceAll('"', "") });
      });
    });
    req.setTimeout(IDLE_TIMEOUT_MS, () => fail(new TransferError(`${what}: no progress for ${IDLE_TIMEOUT_MS / 1000} s`, true)));
    req.on("error", (e) => fail(new TransferError(`${what} failed: ${e.message}`, true)));
    if (body instanceof Uint8Array) req.end(body);
    else pipeline(body, req).catch((e) => fail(e instanceof TransferError ? e : new TransferError(`${what}: sending the body failed: ${(e as Error).message}`, false)));
  });
}

/**
 * GETs bytes [first, last] of `u` and resolves with the 206 response once its Content-Range is checked against
 * the range asked for and the object's expected total size. The caller reads the body (and destroys it on abort).
 */
export function getRange(u: URL, first: number, last: number, total: number, what: string, signal: AbortSignal): Promise<IncomingMessage> {
  const { request, agent } = send(u);
  return new Promise<IncomingMessage>((resolve, reject) => {
    const req = request(u, { method: "GET", agent, signal, headers: { range: `bytes=${first}-${last}` } }, (res) => {
      const status = res.statusCode ?? 0;
      const fail = (e: TransferError) => {
        res.resume();
        req.destroy();
        reject(e);
      };
      if (status !== 206) {
        if (status === 200) return fail(new TransferError(`${what}: the server ignored the Range header (answered 200, not 206)`, false, status));
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (d: string) => (text = (text + d).slice(0, 4000)));
        res.on("end", () => reject(expiredUrlError(what, status, text) ?? new TransferError(`${what} answered ${describeS3Error(status, text)}`, retryableStatus(status), status)));
        res.on("error", (e) => reject(new TransferError(`${what}: response broke: ${e.message}`, true)));
        return;
      }
      const cr = String(res.headers["content-range"] ?? "");
      const m = cr.match(/^bytes (\d+)-(\d+)\/(\d+|\*)$/);
      if (!m || Number(m[1]) !== first || Number(m[2]) !== last) {
        return fail(new TransferError(`${what}: asked for bytes ${first}-${last} but Content-Range is '${cr}'`, false, status));
      }
      if (m[3] !== String(total)) {
        return fail(new TransferError(`${what}: the object has ${m[3]} bytes, not the ${total} given as size`, false, status));
      }
      resolve(res);
    });
    // Socket inactivity for the whole exchange, the response body included.
    req.setTimeout(IDLE_TIMEOUT_MS, () => req.destroy(new TransferError(`${what}: no progress for ${IDLE_TIMEOUT_MS / 1000} s`, true)));
    req.on("error", (e) => reject(e instanceof TransferError ? e : new TransferError(`${what} failed: ${e.message}`, !signal.aborted)));
    req.end();
  });
}

/**
 * Runs `attempt` up to 1 + `retries` times while it fails with a retryable error, backing off 0.2 s, 0.4 s, ...
 * An unclassified error that survives the retries (a reset mid-body) is the transfer's failure: tool_failed.
 */
export async function withRetries<T>(retries: number, stop: () => boolean, attempt: (n: number) => Promise<T>): Promise<T> {
  for (let n = 0; ; n++) {
    try {
      return await attempt(n);
    } catch (e) {
      const retryable = e instanceof TransferError ? e.retryable : !(e instanceof AgentError);
      if (!retryable || n >= retries || stop()) throw toolFailure("presigned transfer", e);
      await new Promise((r) => setTimeout(r, 200 * 2 ** n));
    }
  }
}
