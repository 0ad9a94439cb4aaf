// A fault proxy of our own, for tests: an HTTP proxy on loopback in front of the object store, through which
// every part of the test stack reaches it (the Worker's store and the URLs it presigns, and so the agent), and a
// second instance in front of the agent, through which the Worker reaches it (its AGENT_URL). With
// no fault armed it passes bytes through unchanged — Host included, so S3 signatures made for the proxy's address
// hold at the store. Armed (POST /__faults), it breaks one kind of request for real, mid-stream:
//
//   status  answer `status` (an S3 error body) without forwarding: the store failing one request
//   cut     forward, then destroy both connections after `afterBytes` bytes of the body (request or response)
//   stall   forward, then stop passing bytes for `ms` after `afterBytes`, then go on
//   refuse  close the connection at once, answering nothing (nothing listening, a crashed peer)
//   lie     forward, then answer the upstream's JSON with the fields in `set` replaced ("a.0.b" → value): a
//           compromised agent that did the work and reports whatever it likes (issue 21)
//   strip   forward without the query parameters named in `query` (a store or proxy that drops them, so what they
//           bound is not checked: SigV4 then fails the signature, as a real store would), and answer without the
//           response headers named in `responseHeaders` (a store that keeps no checksum to report); request headers
//           named in `requestHeaders` are not forwarded (a proxy that drops Range, so the store answers the whole object)
//
// A fault matches requests whose method (optional) and path + query (substrings) match, and whose headers hold the
// values in `headers` (optional; the agent's x-snapflow-sandbox names the sandbox), `times` times, so a test aims at
// its own keys or sandboxes and cannot break another test's. A client that goes away (a deadline that aborted its
// request) closes the upstream connection too, as a real network path would. GET /__faults lists what fired, GET /__requests every
// request passed (path, and the query's uploads / partNumber), so a test can count attempts. The harness also answers
// POST /__agent/kill (SIGKILL the agent process mid-whatever and start it again on the same port), set up by
// test/global-setup.ts, because a test in workerd cannot signal a process.
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { Transform, type TransformCallback } from "node:stream";

export interface Fault {
  /** substrings the request's path + query must all hold */
  match: string | string[];
  method?: string;
  /** header name → a substring its value must hold */
  headers?: Record<string, string>;
  action: "status" | "cut" | "stall" | "refuse" | "lie" | "strip";
  /** strip: query parameters dropped before forwarding, and response headers dropped from the answer */
  query?: string[];
  responseHeaders?: string[];
  requestHeaders?: string[];
  /** lie: dotted paths into the JSON answer ("index.chunks.0.sha256") and the values put there */
  set?: Record<string, unknown>;
  /** status */
  status?: number;
  /** cut, stall: after this many body bytes (of `body`); default 0 */
  afterBytes?: number;
  /** cut, stall: which body to break; default the request's for PUT/POST, else the response's */
  body?: "request" | "response";
  /** stall */
  ms?: number;
  times: number;
}

export interface FiredFault {
  fault: Omit<Fault, "times">;
  method: string;
  path: string;
  at: string;
  /** how the exchange ended: "completed", "client went away", "upstream failed: …" */
  ended?: string;
}

export interface FaultProxy {
  url: string;
  server: Server;
  fired: FiredFault[];
  stop(): Promise<void>;
}

/** The JSON answer with each dotted path in `set` replaced (numeric segments index arrays). */
function lieIn(body: string, set: Record<string, unknown>): string {
  const answer = JSON.parse(body);
  for (const [path, value] of Object.entries(set)) {
    const parts = path.split(".");
    let at = answer;
    for (const p of parts.slice(0, -1)) at = at[p];
    at[parts.at(-1)!] = value;
  }
  return JSON.stringify(answer);
}

/** The path and query without the named parameters (compared case-insensitively, as S3 reads x-amz-* names). */
function withoutParams(url: string, names: string[]): string {
  const [path, query] = url.split("?", 2) as [string, string | undefined];
  if (query === undefined) return url;
  const drop = new Set(names.map((n) => n.toLowerCase()));
  const kept = query.split("&").filter((pair) => !drop.has(decodeURIComponent(pair.split("=")[0]!).toLowerCase()));
  return kept.length ? `${path}?${kept.join("&")}` : path;
}

/** Passes bytes on; after `afterBytes`, either destroys (cut) or pauses (stall). */
function breaker(fault: Fault, onCut: () => void): Transform {
  let seen = 0;
  let broken = false;
  return new Transform({
    transform(chunk: Buffer, _enc, done: TransformCallback) {
      const after = fault.afterBytes ?? 0;
      if (broken || seen + chunk.length <= after) {
        seen += chunk.length;
        return done(null, chunk);
      }
      broken = true;
      const head = chunk.subarray(0, Math.max(0, after - seen));
      const tail = chunk.subarray(head.length);
      seen += chunk.length;
      if (head.length) this.push(head);
      if (fault.action === "cut") {
        onCut();
        return done();
      }
      // unref: a stall still pending when the suite ends must not keep the test process alive
      setTimeout(() => done(null, tail), fault.ms ?? 1000).unref();
    },
  });
}

export async function startFaultProxy(upstream: string, extra: Record<string, (req: IncomingMessage, res: ServerResponse) => Promise<void>> = {}): Promise<FaultProxy> {
  const target = new URL(upstream);
  const armed: Fault[] = [];
  const fired: FiredFault[] = [];
  // Every request passed, so a test can count attempts (a retry is a second request for the same thing).
  const seen: { method: string; path: string; sandbox?: string }[] = [];

  const take = (req: IncomingMessage): Fault | undefined => {
    const i = armed.findIndex((f) => (!f.method || f.method === req.method) && [f.match].flat().every((m) => (req.url ?? "").includes(m))
      && Object.entries(f.headers ?? {}).every(([name, value]) => String(req.headers[name.toLowerCase()] ?? "").includes(value)));
    if (i < 0) return undefined;
    const f = armed[i]!;
    if (--f.times <= 0) armed.splice(i, 1);
    const { times: _t, ...fault } = f;
    fired.push({ fault, method: req.method ?? "", path: req.url ?? "", at: new Date().toISOString() });
    return f;
  };

  const control = async (req: IncomingMessage, res: ServerResponse) => {
    if (req.method === "POST" && req.url === "/__faults") {
      let body = "";
      for await (const c of req) body += c;
      const f = JSON.parse(body) as Fault;
      armed.push({ ...f, times: f.times ?? 1 });
      return res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ armed: f }));
    }
    if (req.method === "GET" && req.url === "/__faults") return res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ fired, armed }));
    if (req.method === "GET" && req.url === "/__requests") return res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ seen }));
    if (req.method === "DELETE" && req.url?.startsWith("/__faults?match=")) {
      // Only the faults aimed at one test's requests (a test sharing the proxy with others must not disarm theirs).
      const match = decodeURIComponent(req.url.slice("/__faults?match=".length));
      for (let i = armed.length - 1; i >= 0; i--) if ([armed[i]!.match].flat().includes(match)) armed.splice(i, 1);
      return res.writeHead(200, { "content-type": "application/json" }).end("{}");
    }
    if (req.method === "DELETE" && req.url === "/__faults") {
      armed.length = 0;
      return res.writeHead(200, { "content-type": "application/json" }).end("{}");
    }
    const handler = extra[`${req.method} ${req.url}`];
    if (handler) return handler(req, res);
    res.writeHead(404).end();
  };

  const server = createServer((req, res) => {
    if (req.url?.startsWith("/__")) {
      control(req, res).catch((e: Error) => res.writeHead(500).end(e.message));
      return;
    }
    if (seen.length < 100_000) {
      const sandbox = req.headers["x-snapflow-sandbox"];
      seen.push({ method: req.method ?? "", path: (req.url ?? "").split("?")[0] + ((req.url ?? "").match(/[?&](uploads|partNumber=\d+)/)?.[0] ?? ""), ...(typeof sandbox === "string" ? { sandbox } : {}) });
    }
    const fault = take(req);
    if (fault?.action === "refuse") {
      req.socket.destroy();
      return;
    }
    if (fault?.action === "status") {
      req.resume();
      req.on("end", () => res.writeHead(fault.status ?? 500, { "content-type": "application/xml" }).end(`<Error><Code>InternalError</Code><Message>injected by the test fault proxy</Message></Error>`));
      return;
    }
    const path = fault?.action === "strip" && fault.query?.length ? withoutParams(req.url ?? "", fault.query) : req.url;
    const dropHeaders = new Set(fault?.action === "strip" ? (fault.requestHeaders ?? []).map((h) => h.toLowerCase()) : []);
    const headers = dropHeaders.size ? Object.fromEntries(Object.entries(req.headers).filter(([k]) => !dropHeaders.has(k.toLowerCase()))) : req.headers;
    const up = request({ host: target.hostname, port: target.port, method: req.method, path, headers });
    const cut = () => {
      ended("cut by the proxy");
      up.destroy();
      req.destroy();
      res.destroy();
    };
    const onRequestBody = fault && fault.action !== "lie" && fault.action !== "strip" && (fault.body ? fault.body === "request" : req.method === "PUT" || req.method === "POST");
    // How a faulted exchange ended, first cause only: a test tells "the client's deadline gave up" from "the upstream hung up".
    const record = fault ? fired.at(-1) : undefined;
    const ended = (how: string) => {
      if (record && !record.ended) record.ended = how;
    };
    up.on("response", (r) => {
      // An upstream that dies mid-answer (the agent SIGKILLed) breaks the client's connection too, at once.
      r.on("error", (e) => {
        ended(`upstream failed: ${e.message}`);
        res.destroy();
      });
      if (fault?.action === "lie") {
        let body = "";
        r.setEncoding("utf8");
        r.on("data", (c: string) => (body += c));
        r.on("end", () => {
          const lie = lieIn(body, fault.set ?? {});
          const { "content-length": _length, "transfer-encoding": _te, ...headers } = r.headers;
          res.writeHead(r.statusCode ?? 502, { ...headers, "content-length": Buffer.byteLength(lie) }).end(lie);
        });
        return;
      }
      const dropped = new Set(fault?.action === "strip" ? (fault.responseHeaders ?? []).map((h) => h.toLowerCase()) : []);
      res.writeHead(r.statusCode ?? 502, Object.fromEntries(Object.entries(r.headers).filter(([name]) => !dropped.has(name))));
      (fault && fault.action !== "strip" && !onRequestBody ? r.pipe(breaker(fault, cut)) : r).pipe(res);
    });
    up.on("error", (e) => {
      ended(`upstream failed: ${e.message}`);
      res.destroy();
    });
    req.on("error", () => up.destroy());
    // The client gave up (or was cut): so does the connection to the upstream, which then sees its peer go away.
    res.on("close", () => {
      ended(res.writableFinished ? "completed" : "client went away");
      if (!res.writableFinished) up.destroy();
    });
    (onRequestBody ? req.pipe(breaker(fault, cut)) : req).pipe(up);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}`,
    server,
    fired,
    stop: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}
