// One request to the agent under a Deadline (agent-deadlines.ts): a bound on the whole call, and for streamed calls
// a bound on the agent's silence. Both bodies are wrapped so that the silence can be measured where it belongs and
// so that a deadline that fires really ends everything: the fetch is aborted (its signal), the request body's
// source is cancelled (our reader released, the store's GET it came from closed), the response body is cancelled
// upstream and errors downstream with the deadline's error. No reader is left waiting and no timer left running.
// The same release happens when the exchange ends any other way before the request body's source was read to its
// end (the connection broke, the agent answered early with an error): that source is cancelled, not left open.
//
// Silence is counted only while we wait on the agent:
//   - before the answer's headers, except while the request body waits on its own source (the store);
//   - on the request body: from handing a chunk over until the agent's connection takes the next one;
//   - on the response body: while the consumer has asked for bytes and none came. A consumer that is not reading
//     (an upload to the store applying backpressure) is not the agent's silence.
//
// Both bodies are read in blocks of 256 KiB (store/block-reader.ts), and the silence is counted per block: a fetch
// body arrives in ~4 KB chunks, and a timer reset and a JS hop for each cost workerd most of its CPU on a relayed
// archive. So "silence" is "not a block (or the end) within the bound": at the 60 s default a stream slower than
// 4.4 KB/s counts as silent, far below the 1 MB/s that already bounds an answer of known size.
import { blockReader } from "../store/block-reader.ts";
import { SLOWEST_BYTES_PER_SECOND, type Deadline } from "./agent-deadlines.ts";

/**
 * Each JS wrapper reads ahead up to 1 MiB, so that reading one side overlaps writing the other (a queue of 0 took
 * 2769 ms against 1569 ms for `npm start`'s 105 MB squashfs-zstd-3 image transfer). A full queue is the consumer's
 * backpressure: no pull runs then, so no silence is counted against the agent.
 */
/** The answer's length when it says one (a file read), else undefined (a stream made as it goes). */
function knownSize(r: Response): number | undefined {
  const n = Number(r.headers.get("content-length") ?? NaN);
  return Number.isSafeInteger(n) && n > 0 ? n : undefined;
}

const readAhead = () => new ByteLengthQueuingStrategy({ highWaterMark: 1 << 20 });

export interface DeadlineFailures {
  /** the error a deadline that fired becomes */
  timeout(kind: "silence" | "total" | "sized", ms: number): Error;
  /** the error a connection that failed becomes (refused, reset, cut mid-body) */
  broken(during: "request" | "response body", cause: unknown): Error;
}

export async function fetchWithDeadline(
  send: (init: RequestInit) => Promise<Response>,
  init: RequestInit,
  deadline: Deadline,
  failures: DeadlineFailures,
): Promise<Response> {
  const abort = new AbortController();
  const onFail: (() => void)[] = [];
  let failed: Error | undefined;
  let finished = false;
  let paused = 0;
  let idleTimer: ReturnType<typeof setTimeout> | null = null;

  const stopTimers = () => {
    clearTimeout(idleTimer);
    clearTimeout(totalTimer);
  };
  const fail = (e: Error) => {
    if (failed || finished) return;
    failed = e;
    stopTimers();
    abort.abort(e);
    for (const f of onFail) f();
  };
  /** Set when the request body is a stream: cancels its source unless it was read to the end. */
  let releaseSource: (reason: unknown) => void = () => {};
  const finish = () => {
    finished = true;
    stopTimers();
    releaseSource(new Error("the agent's answer ended before the request body was sent whole"));
  };
  let totalTimer = setTimeout(() => fail(failures.timeout("total", deadline.totalMs)), deadline.totalMs);
  /** Bytes moved (or we started waiting on the agent): the silence is counted from now. */
  const touch = () => {
    if (deadline.idleMs === undefined) return;
    clearTimeout(idleTimer);
    if (paused === 0 && !failed && !finished) idleTimer = setTimeout(() => fail(failures.timeout("silence", deadline.idleMs!)), deadline.idleMs);
  };
  /** Waiting on someone other than the agent: silence is not counted until resume. */
  const pause = () => {
    paused++;
    clearTimeout(idleTimer);
  };
  const resume = () => {
    paused--;
    touch();
  };

  /**
   * An answer of known size on a streamed call (a staged archive or image read from the agent) is returned as the
   * fetch gave it, not wrapped in JS: a per-chunk JS pull cost 2205 ms against 715 ms unwrapped for `npm start`'s
   * 105 MB image (one run each, the stream path's file read → store), and the runtime's own body keeps its length and
   * its native pipes (workerd cannot pipe one transform stream into another, so a native pass-through does not serve).
   * The bound becomes one on the whole body: the silence bound plus its size at 1 MB/s; aborting the fetch then
   * errors the body. Unwrapped, its end is not seen, so that one timer runs out its bound (it holds nothing else).
   */
  const sizedBody = (r: Response, size: number, idleMs: number) => {
    const boundMs = idleMs + Math.ceil((size / SLOWEST_BYTES_PER_SECOND) * 1000);
    clearTimeout(idleTimer);
    clearTimeout(totalTimer);
    totalTimer = setTimeout(() => fail(failures.timeout("sized", boundMs)), boundMs);
    return r;
  };

  let body = init.body;
  if (body instanceof ReadableStream) {
    const source = blockReader(body as ReadableStream<Uint8Array>);
    let sourceEnded = false;
    releaseSource = (reason) => {
      if (sourceEnded) return;
      sourceEnded = true;
      void source.cancel(reason).catch(() => {});
    };
    onFail.push(() => releaseSource(failed));
    body = new ReadableStream<Uint8Array>({
      async pull(c) {
        pause();
        let next: ReadableStreamReadResult<Uint8Array>;
        try {
          next = await source.read();
        } finally {
          resume();
        }
        if (failed || sourceEnded) return;
        if (next.done) {
          sourceEnded = true;
          c.close();
        } else c.enqueue(next.value);
      },
      cancel: (reason) => releaseSource(reason),
    }, readAhead());
  }

  touch();
  let r: Response;
  try {
    r = await send({ ...init, body, signal: abort.signal });
  } catch (e) {
    if (failed) throw failed;
    const broken = failures.broken("request", e);
    releaseSource(broken);
    finish();
    throw broken;
  }
  if (failed) {
    await r.body?.cancel().catch(() => {});
    throw failed;
  }
  if (!r.body) {
    finish();
    return r;
  }
  const size = knownSize(r);
  if (deadline.idleMs !== undefined && size !== undefined) return sizedBody(r, size, deadline.idleMs);
  const upstream = blockReader(r.body);
  // The consumer has not asked for bytes yet: not the agent's silence.
  pause();
  let out!: ReadableStreamDefaultController<Uint8Array>;
  onFail.push(() => {
    void upstream.cancel(failed).catch(() => {});
    try {
      out.error(failed);
    } catch {
      // already closed or errored
    }
  });
  const wrapped = new ReadableStream<Uint8Array>({
    start(c) {
      out = c;
    },
    async pull(c) {
      resume();
      let next: ReadableStreamReadResult<Uint8Array>;
      try {
        next = await upstream.read();
      } catch (e) {
        if (failed) return;
        finish();
        throw failures.broken("response body", e);
      } finally {
        pause();
      }
      if (failed) return;
      if (next.done) {
        finish();
        c.close();
      } else {
        touch();
        c.enqueue(next.value);
      }
    },
    cancel(reason) {
      finish();
      return upstream.cancel(reason);
    },
  }, readAhead());
  return new Response(wrapped, { status: r.status, statusText: r.statusText, headers: r.headers });
}
