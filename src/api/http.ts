// HTTP plumbing for the API: JSON responses, errors that name the offending field, zod parsing, bearer auth.
import type { z } from "zod";
import { asSnapflowError, SnapflowError } from "../errors.ts";

export function json(body: unknown, status = 200, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body, null, 1), { status, headers: { "content-type": "application/json", ...headers } });
}

/** Any error as the API's answer: {error: {code, message, field?}} with the code's status. */
export function errorResponse(e: unknown): Response {
  const err = asSnapflowError(e);
  if (err.code === "internal_error") console.error("unhandled", e);
  return json(err.toJSON(), err.status);
}

/** Parses a JSON body against a schema; a bad body is a 400 whose message and field name the first problem. */
export async function parseBody<T extends z.ZodType>(request: Request, schema: T): Promise<z.infer<T>> {
  let raw: unknown;
  try {
    raw = await request.json();
  } catch {
    throw new SnapflowError("bad_request", "the request body must be JSON", { field: "body" });
  }
  const r = schema.safeParse(raw);
  if (r.success) return r.data;
  const issue = r.error.issues[0]!;
  const field = issue.path.join(".") || "body";
  throw new SnapflowError("bad_request", `${field}: ${issue.message}`, { field });
}

/** Constant-time comparison of the bearer token. */
export function checkBearer(request: Request, token: string): void {
  const given = request.headers.get("authorization") ?? "";
  const a = new TextEncoder().encode(given);
  const b = new TextEncoder().encode(`Bearer ${token}`);
  if (a.byteLength !== b.byteLength || !crypto.subtle.timingSafeEqual(a, b)) {
    throw new SnapflowError("unauthorized", "missing or wrong API token: send 'authorization: Bearer <API_TOKEN>'", { field: "authorization" });
  }
}
