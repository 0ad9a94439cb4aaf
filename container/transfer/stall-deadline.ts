// A deadline on the store's silence: a GET whose response does not start, or whose body stops flowing, for longer
// than the limit is aborted with an error saying so, instead of holding a Workflow step (and a restore's staged
// tree) until the step's own 30–60 minute timeout. Silence, not total time: a slow but moving multi-gigabyte
// download is fine. The limit is SNAPFLOW_AGENT_STORE_IDLE_SECONDS (default 60).
import { Readable, Transform } from "node:stream";
import { AgentError } from "../http/agent-error.ts";
import { redactUrls } from "../contract/redact-url.ts";

export const storeIdleMs = () => Number(process.env.SNAPFLOW_AGENT_STORE_IDLE_SECONDS ?? 60) * 1000;

const stalled = (what: string, ms: number) => new AgentError("tool_failed", `${redactUrls(what)}: the store sent nothing for ${ms / 1000} s (stalled); aborted`);

/** fetch(url) whose response headers must arrive within the limit; the body comes back as a Readable that the same limit guards. */
export async function fetchWithStallDeadline(url: URL, what: string, idleMs = storeIdleMs()): Promise<{ response: Response; body: Readable | null }> {
  const abort = new AbortController();
  const waiting = setTimeout(() => abort.abort(stalled(what, idleMs)), idleMs);
  let response: Response;
  try {
    response = await fetch(url, { signal: abort.signal });
  } catch (e) {
    throw abort.signal.aborted ? abort.signal.reason : e;
  } finally {
    clearTimeout(waiting);
  }
  if (!response.body) return { response, body: null };
  let timer: NodeJS.Timeout | undefined;
  const watchdog = new Transform({
    transform(chunk, _enc, done) {
      arm();
      done(null, chunk);
    },
    flush(done) {
      clearTimeout(timer);
      done();
    },
    destroy(err, done) {
      clearTimeout(timer);
      done(err);
    },
  });
  const arm = () => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      watchdog.destroy(stalled(what, idleMs));
      abort.abort();
    }, idleMs);
  };
  arm();
  const source = Readable.fromWeb(response.body as import("node:stream/web").ReadableStream<Uint8Array>);
  source.on("error", (e) => watchdog.destroy(e));
  return { response, body: source.pipe(watchdog) };
}
