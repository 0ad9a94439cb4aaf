// The agent's HTTP server: authenticate, find the sandbox's root, validate with the protocol's schemas, run the
// operation, answer JSON (or stream bytes). Errors become {error:{code,message,field}} with the AgentError's
// status; an exception that no code describes is internal_error (a bug), never a tool's failure. A failure after
// a streamed response has started aborts the connection, so the reader sees an error rather than a short archive
// that looks complete. The operations live in routes/, one module per concern; this file only authenticates,
// finds the sandbox root, dispatches and maps errors.
import { timingSafeEqual } from "node:crypto";
import { mkdir } from "node:fs/promises";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { join } from "node:path";
import type { z } from "zod";
import { AgentError, asAgentError, isNoSpace } from "./agent-error.ts";
import { diskSpace } from "../system/disk-space.ts";
import { Faults } from "./faults.ts";
import { MountRegistry } from "../mounts/mounts.ts";
import * as P from "../contract/protocol.ts";
import { allRoutes } from "../routes/index.ts";
import { STREAMED, type AgentOptions, type AgentState, type Ctx } from "../routes/route.ts";
import { sandboxRoots } from "../contract/sandbox-roots.ts";
import { startSweeper } from "../system/sweep.ts";
import { checkStoreUrl, storeOriginOf } from "./store-origin.ts";
import { agentTokenFor } from "../contract/agent-token.ts";
import { resolveSandboxPath, type SandboxRoot } from "../system/path-confinement.ts";

function parse<T extends z.ZodType>(schema: T, value: unknown, where: string): z.infer<T> {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  const issue = r.error.issues[0]!;
  const field = issue.path.join(".") || where;
  throw new AgentError("bad_request", `${field}: ${issue.message}`, field);
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  try {
    return JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}");
  } catch {
    throw new AgentError("bad_request", "the request body is not valid JSON", "body");
  }
}

function sendJson(res: ServerResponse, status: number, body: unknown) {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

export function createAgentServer(options: AgentOptions): Server {
  const agent: AgentState = { options, mounts: new MountRegistry(), faults: new Faults() };
  const routes = allRoutes();
  if ("secret" in options.auth && !options.sandboxesDir) throw new Error("an agent inside one sandbox gets its own token, never the secret");
  if ("token" in options.auth && options.sandboxesDir) throw new Error("a host agent serving many sandboxes needs the secret to check each one's token");
  const storeOrigins = options.storeOrigins.map((o) => storeOriginOf(o, "storeOrigins"));
  if (options.sweep) startSweeper(agent, options.sweep);

  return createServer(async (req, res) => {
    const url = new URL(req.url ?? "/", "http://agent");
    const route = `${req.method} ${url.pathname}`;
    let scope: { hostRoot: string; route: string } | undefined;
    try {
      // Every route, readiness included: a process that took the agent's port learns nothing from our probe but
      // a token that opens this one sandbox.
      await authenticate(options, req);
      if (route === "GET /v1/health") return sendJson(res, 200, { ok: true });
      const handler = routes.get(route);
      if (!handler) throw new AgentError("not_found", `no route ${route}`);
      const { root, sandboxId } = await sandboxRoot(options, req.headers[P.SANDBOX_HEADER]);
      scope = { hostRoot: root.hostRoot, route };
      agent.faults.check(`${sandboxId} ${route}`);
      const ctx: Ctx = {
        req, res, url, root, sandboxId, agent,
        path: (value, field) => resolveSandboxPath(root, value, field),
        storeUrl: (value, field) => checkStoreUrl(value, field, storeOrigins),
        json: async (schema) => parse(schema, await readJson(req), "body"),
        query: (schema) => parse(schema, Object.fromEntries(url.searchParams), "query"),
      };
      const result = await handler(ctx);
      if (result !== STREAMED) sendJson(res, 200, result);
    } catch (e) {
      // A full disk is no tool's fault and no retry fixes it: a permanent 507 saying where and how much is free.
      const err = isNoSpace(e) && scope ? await noSpace(scope, e) : asAgentError(e);
      if (res.headersSent) {
        // Mid-stream: the only honest signal left is to break the connection.
        res.destroy(err);
        return;
      }
      // Drain what the client is still sending, so it reads our answer instead of a reset.
      req.resume();
      sendJson(res, err.status, err.toJSON());
    }
  });
}

async function authenticate(options: AgentOptions, req: IncomingMessage): Promise<void> {
  // A host agent checks the token against the sandbox the request names: one sandbox's token opens only it.
  const token = "token" in options.auth ? options.auth.token : await agentTokenFor(options.auth.secret, parse(P.SANDBOX_ID, req.headers[P.SANDBOX_HEADER], P.SANDBOX_HEADER));
  const expected = Buffer.from(`Bearer ${token}`);
  const auth = Buffer.from(req.headers.authorization ?? "");
  if (auth.length !== expected.length || !timingSafeEqual(auth, expected)) {
    throw new AgentError("unauthorized", "missing or wrong agent token for this sandbox (authorization: Bearer ...)", "authorization");
  }
}

async function sandboxRoot(options: AgentOptions, header: string | string[] | undefined): Promise<{ root: SandboxRoot; sandboxId: string }> {
  if (!options.sandboxesDir) return { root: { hostRoot: "/" }, sandboxId: typeof header === "string" ? header : "self" };
  const id = parse(P.SANDBOX_ID, header, P.SANDBOX_HEADER);
  const hostRoot = join(options.sandboxesDir, id);
  // A fresh sandbox starts with its allowed roots present, as the image has them.
  for (const r of sandboxRoots()) await mkdir(join(hostRoot, r), { recursive: true });
  return { root: { hostRoot }, sandboxId: id };
}

/** The 507 for a full disk: the original error (it names the file being written) and the sandbox disk's free space now. */
async function noSpace(scope: { hostRoot: string; route: string }, e: unknown): Promise<AgentError> {
  const space = await diskSpace(scope.hostRoot).catch(() => null);
  const shown = (e instanceof Error ? e.message : String(e)).replaceAll(scope.hostRoot === "/" ? "\0" : scope.hostRoot, "");
  const free = space ? `; ${space.freeBytes} bytes free of ${space.totalBytes} now` : "";
  return new AgentError("no_space", `no space left on the sandbox's disk during ${scope.route}${free}: ${shown}`);
}
