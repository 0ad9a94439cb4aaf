// What every route module shares: the per-request context the server builds (sandbox root, path resolution,
// validated body and query), the agent's long-lived state, and the handler shape. A handler returns a JSON
// value, or STREAMED once it has written the response itself.
import { stat } from "node:fs/promises";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { z } from "zod";
import { AgentError } from "../http/agent-error.ts";
import type { Faults } from "../http/faults.ts";
import type { MountRegistry } from "../mounts/mounts.ts";
import type { SandboxRoot } from "../system/path-confinement.ts";

export interface AgentOptions {
  /**
   * How requests are authenticated (agent-token.ts): `token`, this sandbox's own derived token (an agent inside a
   * sandbox); or `secret`, the Worker's AGENT_SECRET, from which a host agent derives each sandbox's token.
   */
  auth: { token: string } | { secret: string };
  /** Host mode: one root directory per sandbox id below this directory. Unset: this process *is* the sandbox, root "/". */
  sandboxesDir?: string;
  /** the only origins the agent fetches from or uploads to (the object store's endpoint); store-origin.ts */
  storeOrigins: string[];
  faults?: boolean;
  /** sweep what dead runs left (sweep.ts) at start and then periodically; off when absent (tests drive it by route) */
  sweep?: { olderThanMs: number; everyMs: number };
}

/** State that lives as long as the server: what it mounted, what faults are armed, how it was started. */
export interface AgentState {
  options: AgentOptions;
  mounts: MountRegistry;
  faults: Faults;
}

export interface Ctx {
  req: IncomingMessage;
  res: ServerResponse;
  url: URL;
  root: SandboxRoot;
  sandboxId: string;
  agent: AgentState;
  path(value: unknown, field: string): Promise<string>;
  /** a URL the agent may fetch: on the store's origin, else a 400 naming `field` */
  storeUrl(value: unknown, field: string): string;
  json<T extends z.ZodType>(schema: T): Promise<z.infer<T>>;
  query<T extends z.ZodType>(schema: T): z.infer<T>;
}

export type Handler = (ctx: Ctx) => Promise<unknown>;

export type RouteKey = `${"GET" | "POST" | "PUT" | "DELETE"} /v1/${string}`;

export type Routes = Record<RouteKey, Handler>;

/** A handler's answer when it has already written the response (a byte stream). */
export const STREAMED = Symbol("streamed");

export async function existingDir(dir: string, field: string): Promise<string> {
  const st = await stat(dir).catch(() => null);
  if (!st?.isDirectory()) throw new AgentError("not_found", `${field}: no directory there`, field);
  return dir;
}
