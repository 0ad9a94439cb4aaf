// HTTP plumbing for the API: JSON responses, errors that name the offending field, zod parsing, bearer auth.
import type { z } from "zod";

export class ApiError extends Error {
  readonly status: number;
  readonly field: string | undefined;
  constructor(status: number, message: string, field?: string) {
    super(message);
    this.status = status;
    this.field = field;
  }
}

export function json(body: unknown, status = 200, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body, null, 1), { status, headers: { "content-type": "application/json", ...headers } });
}

export function errorResponse(e: ApiError): Response {
  return json({ error: { message: e.message, ...(e.field ? { field: e.field } : {}) } }, e.status);
}

/** Parses a JSON body against a schema; a bad body is a 400 whose message and field name the first problem. */
export async function parseBody<T extends z.ZodType>(request: Request, schema: T): Promise<z.infer<T>> {
  let raw: unknown;
  try {
    raw = await request.json();
  } catch {
    throw new ApiError(400, "the request body must be JSON", "body");
  }
  const r = schema.safeParse(raw);
  if (r.success) return r.data;
  const issue = r.error.issues[0]!;
  const field = issue.path.join(".") || "body";
  throw new ApiError(400, `${field}: ${issue.message}`, field);
}

/** Constant-time comparison of the bearer token. */
export function checkBearer(request: Request, token: string): void {
  const given = request.headers.get("authorization") ?? "";
  const a = new TextEncoder().encode(given);
  const b = new TextEncoder().encode(`Bearer ${token}`);
  if (a.byteLength !== b.byteLength || !crypto.subtle.timingSafeEqual(a, b)) {
    throw new ApiError(401, "missing or wrong API token: send 'authorization: Bearer <API_TOKEN>'", "authorization");
  }
}

/** A run id: sortable by time, unique enough, and valid as a Workflow instance id. */
export function newId(prefix: string): string {
  const t = new Date().toISOString().replace(/[-:TZ.]/g, "").slice(0, 14);
  const r = [...crypto.getRandomValues(new Uint8Array(4))].map((b) => b.toString(16).padStart(2, "0")).join("");
  return `${prefix}-${t}-${r}`;
}
