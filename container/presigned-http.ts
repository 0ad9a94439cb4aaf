// The HTTP plumbing shared by the parallel presigned transfers (presigned-multipart.ts, presigned-ranged.ts):
// keep-alive agents, one PUT of an in-memory part, one ranged GET, and which failures are worth a retry.
//
// node:http / node:https rather than fetch: a part's Content-Length is set explicitly, the connection pool is
// ours (keep-alive, so the many part PUTs and range GETs of one transfer reuse TLS connections), and the same
// code runs under Node and Bun.
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import { AgentError } from "./agent-error.ts";

const httpAgent = new HttpAgent({ keepAlive: true, maxSockets: 128 });
const httpsAgent = new HttpsAgent({ keepAlive: true, maxSockets: 128 });

/** A request that makes no progress (no bytes either way) for this long fails, so a stuck store cannot hang us. */
export const IDLE_TIMEOUT_MS = 60_000;

/** An HTTP failure; `retryable` for network errors, 5xx and 429, not for other 4xx (a bad signature stays bad). */
export class TransferError extends AgentError {
  readonly retryable: boolean;
  readonly httpStatus: number | undefined;
  constructor(message: string, retryable: boolean, httpStatus?: number) {
    super("tool_failed", message);
    this.retryable = retryable;
    this.httpStatus = httpStatus;
  }
}

const retryableStatus = (s: number) => s >= 500 || s === 429;

/** The S3 error code and message of an XML error body, or the body's start. */
function describe(status: number | undefined, body: string): string {
  const code = body.match(/<Code>([^<]+)<\/Code>/)?.[1];
  const message = body.match(/<Message>([^<]+)<\/Message>/)?.[1];
  return `HTTP ${status}${code ? ` ${code}` : ""}${message ? `: ${message}` : body.trim() && !code ? `: ${body.trim().slice(0, 300)}` : ""}`;
}

function send(u: URL) {
  return u.protocol === "https:" ? { request: httpsRequest, agent: httpsAgent } : { request: httpRequest, agent: httpAgent };
}

/** The query string of a presigned URL is a credential: never put it in an error message. */
export function redact(u: URL): string {
  return `${u.origin}${u.pathname}`;
}

/** PUTs `body` with its Content-Length and resolves with the response's ETag (quotes stripped). */
export function putBytes(u: URL, body: Uint8Array, what: string): Promise<string> {
  const { request, agent } = send(u);
  return new Promise<string>((resolve, reject) => {
    let settled = false;
    const fail = (e: TransferError) => {
      if (settled) return;
      settled = true;
      req.destroy(); // a connection that broke mid-body must not go back to the pool
      reject(e);
    };
    const req = request(u, { method: "PUT", agent, headers: { "content-length": body.byteLength } }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (d: string) => (text = (text + d).slice(0, 4000)));
      res.on("error", (e) => fail(new TransferError(`${what}: response broke: ${e.message}`, true)));
      res.on("end", () => {
        const status = res.statusCode ?? 0;
        if (status < 200 || status >= 300) return fail(new TransferError(`${what} answered ${describe(status, text)}`, retryableStatus(status), status));
        const etag = res.headers.etag;
        if (!etag) return fail(new TransferError(`${what} answered ${status} without an ETag`, false, status));
        // A 2xx with an ETag means the store read the whole body (the ETag is over all of it), so every byte has
        // left this process and the caller may reuse the buffer. (Not req's 'finish': Bun's ClientRequest does not
        // promise it.)
        if (settled) return;
        settled = true;
        resolve(etag.replaceAll('"', ""));
      });
    });
    req.setTimeout(IDLE_TIMEOUT_MS, () => fail(new TransferError(`${what}: no progress for ${IDLE_TIMEOUT_MS / 1000} s`, true)));
    req.on("error", (e) => fail(new TransferError(`${what} failed: ${e.message}`, true)));
    req.end(body);
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
        res.on("end", () => reject(new TransferError(`${what} answered ${describe(status, text)}`, retryableStatus(status), status)));
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

/** Runs `attempt` up to 1 + `retries` times while it fails with a retryable error, backing off 0.2 s, 0.4 s, ... */
export async function withRetries<T>(retries: number, stop: () => boolean, attempt: (n: number) => Promise<T>): Promise<T> {
  for (let n = 0; ; n++) {
    try {
      return await attempt(n);
    } catch (e) {
      const retryable = e instanceof TransferError ? e.retryable : !(e instanceof AgentError);
      if (!retryable || n >= retries || stop()) throw e;
      await new Promise((r) => setTimeout(r, 200 * 2 ** n));
    }
  }
}
