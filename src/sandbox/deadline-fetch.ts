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

/** The answer's length when it says one (a file read), else undefined (a stream made as it goes). */
function knownSize(r: Response): number | undefined {
  const n = Number(r.headers.get("content-length") ?? NaN);
  return Number.isSafeInteger(n) && n > 0 ? n : undefined;
}

/**
 * Each JS wrapper reads ahead up to 1 MiB, so that reading one side overlaps writing the other (a queue of 0 took
 * 2769 ms against 1569 ms for `npm start`'s 105 MB squashfs-zstd-3 image transfer). A full queue is the consumer's
 * backpressure: no pull runs then, so no silence is counted against the agent.
 */
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
  const exchange = new Exchange(deadline, failures);
  const body = init.body instanceof ReadableStream ? exchange.requestBody(init.body as ReadableStream<Uint8Array>) : init.body;
  exchange.touch();
  let r: Response;
  try {
    r = await send({ ...init, body, signal: exchange.abort.signal });
  } catch (e) {
    throw exchange.sendFailed(e);
  }
  return exchange.answer(r);
}

/** The state of one exchange: its timers, whether it failed or finished, and what a failure must release. */
class Exchange {
  readonly abort = new AbortController();
  private readonly onFail: (() => void)[] = [];
  private failed: Error | undefined;
  private finished = false;
  /** how many waits on someone other than the agent are open: silence is not counted while any is */
  private paused = 0;
  private idleTimer: ReturnType<typeof setTimeout> | null = null;
  private totalTimer: ReturnType<typeof setTimeout>;
  private readonly deadline: Deadline;
  private readonly failures: DeadlineFailures;
  /** Set when the request body is a stream: cancels its source unless it was read to the end. */
  private releaseSource: (reason: unknown) => void = () => {};

  constructor(deadline: Deadline, failures: DeadlineFailures) {
    this.deadline = deadline;
    this.failures = failures;
    this.totalTimer = setTimeout(() => this.fail(failures.timeout("total", deadline.totalMs)), deadline.totalMs);
  }

  private stopTimers(): void {
    clearTimeout(this.idleTimer);
    clearTimeout(this.totalTimer);
  }

  private fail(e: Error): void {
    if (this.failed || this.finished) return;
    this.failed = e;
    this.stopTimers();
    this.abort.abort(e);
    for (const f of this.onFail) f();
  }

  private finish(): void {
    this.finished = true;
    this.stopTimers();
    this.releaseSource(new Error("the agent's answer ended before the request body was sent whole"));
  }

  /** Bytes moved (or we started waiting on the agent): the silence is counted from now. */
  touch(): void {
    const idleMs = this.deadline.idleMs;
    if (idleMs === undefined) return;
    clearTimeout(this.idleTimer);
    if (this.paused === 0 && !this.failed && !this.finished) this.idleTimer = setTimeout(() => this.fail(this.failures.timeout("silence", idleMs)), idleMs);
  }

  /** Waiting on someone other than the agent: silence is not counted until resume. */
  private pause(): void {
    this.paused++;
    clearTimeout(this.idleTimer);
  }

  private resume(): void {
    this.paused--;
    this.touch();
  }

  /** The request body as sent: read in blocks, its source released when the exchange fails or ends early. */
  requestBody(stream: ReadableStream<Uint8Array>): ReadableStream<Uint8Array> {
    const source = blockReader(stream);
    let sourceEnded = false;
    this.releaseSource = (reason) => {
      if (sourceEnded) return;
      sourceEnded = true;
      void source.cancel(reason).catch(() => {});
    };
    this.onFail.push(() => this.releaseSource(this.failed));
    return new ReadableStream<Uint8Array>({
      pull: async (c) => {
        this.pause();
        let next: ReadableStreamReadResult<Uint8Array>;
        try {
          next = await source.read();
        } finally {
          this.resume();
        }
        if (this.failed || sourceEnded) return;
        if (next.done) {
          sourceEnded = true;
          c.close();
        } else c.enqueue(next.value);
      },
      cancel: (reason) => this.releaseSource(reason),
    }, readAhead());
  }

  /** The error the caller sees when the request itself failed: the deadline's, or the broken connection's. */
  sendFailed(e: unknown): Error {
    if (this.failed) return this.failed;
    const broken = this.failures.broken("request", e);
    this.releaseSource(broken);
    this.finish();
    return broken;
  }

  /** The agent's answer as the caller gets it: as given when it has no body or a known size, else wrapped. */
  async answer(r: Response): Promise<Response> {
    if (this.failed) {
      await r.body?.cancel().catch(() => {});
      throw this.failed;
    }
    if (!r.body) {
      this.finish();
      return r;
    }
    const size = knownSize(r);
    if (this.deadline.idleMs !== undefined && size !== undefined) return this.sizedBody(r, size, this.deadline.idleMs);
    return new Response(this.responseBody(r.body), { status: r.status, statusText: r.statusText, headers: r.headers });
  }

  /**
   * An answer of known size on a streamed call (a staged archive or image read from the agent) is returned as the
   * fetch gave it, not wrapped in JS: a per-chunk JS pull cost 2205 ms against 715 ms unwrapped for `npm start`'s
   * 105 MB image (one run each, the stream path's file read → store), and the runtime's own body keeps its length and
   * its native pipes (workerd cannot pipe one transform stream into another, so a native pass-through does not serve).
   * The bound becomes one on the whole body: the silence bound plus its size at 1 MB/s; aborting the fetch then
   * errors the body. Unwrapped, its end is not seen, so that one timer runs out its bound (it holds nothing else).
   */
  private sizedBody(r: Response, size: number, idleMs: number): Response {
    const boundMs = idleMs + Math.ceil((size / SLOWEST_BYTES_PER_SECOND) * 1000);
    this.stopTimers();
    this.totalTimer = setTimeout(() => this.fail(this.failures.timeout("sized", boundMs)), boundMs);
    return r;
  }

  /** The response body read in blocks; silence counted only while the consumer waits on it. */
  private responseBody(body: ReadableStream<Uint8Array>): ReadableStream<Uint8Array> {
    const upstream = blockReader(body);
    // The consumer has not asked for bytes yet: not the agent's silence.
    this.pause();
    let out!: ReadableStreamDefaultController<Uint8Array>;
    this.onFail.push(() => {
      void upstream.cancel(this.failed).catch(() => {});
      try {
        out.error(this.failed);
      } catch {
        // already closed or errored
      }
    });
    return new ReadableStream<Uint8Array>({
      start: (c) => {
        out = c;
      },
      pull: async (c) => {
        this.resume();
        let next: ReadableStreamReadResult<Uint8Array>;
        try {
          next = await upstream.read();
        } catch (e) {
          if (this.failed) return;
          this.finish();
          throw this.failures.broken("response body", e);
        } finally {
          this.pause();
        }
        if (this.failed) return;
        if (next.done) {
          this.finish();
          c.close();
        } else {
          this.touch();
          c.enqueue(next.value);
        }
      },
      cancel: (reason) => {
        this.finish();
        return upstream.cancel(reason);
      },
    }, readAhead());
  }
}
