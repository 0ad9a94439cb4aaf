// A small client for snapflow's HTTP API, shared by the main job and the CLI. Errors carry the API's message
// and field, so a script can print exactly what the server refused.
export class ApiCallError extends Error {
  readonly status: number;
  readonly field: string | undefined;
  constructor(status: number, message: string, field?: string) {
    super(message);
    this.status = status;
    this.field = field;
  }
}

export interface RunStatus {
  id: string;
  /** cancelled: stopped by POST /api/runs/:id/cancel, its cleanup done (the engine says terminated) */
  status: "queued" | "running" | "paused" | "errored" | "terminated" | "cancelled" | "complete" | "waiting" | "waitingForPause" | "unknown";
  strategy?: string;
  snapshotId?: string;
  steps: Record<string, { ms: number; bytes: number; [k: string]: unknown }>;
  error?: string;
  totalMs?: number;
  /** once it has ended: when it was accepted, and when its outcome was final (its last progress write) */
  startedAt?: string;
  endedAt?: string;
  /** what the watchdog found and did when the run was interrupted (a stack restart, a stall) */
  interrupted?: string[];
}

/** How long one status request may be held by the API (`?wait=`): well under any proxy's idle timeout. */
export const STATUS_WAIT_SECONDS = 10;

export function apiClient(baseUrl: string, token: string) {
  const call = async <T>(method: string, path: string, body?: unknown): Promise<T> => {
    const r = await fetch(`${baseUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const json = (await r.json().catch(() => ({}))) as { error?: { message?: string; field?: string } };
    if (!r.ok) throw new ApiCallError(r.status, json.error?.message ?? `HTTP ${r.status}`, json.error?.field);
    return json as T;
  };
  return {
    call,
    generateDataset: (sandboxId: string, body: Record<string, unknown>) => call<{ files: number; bytes: number; ms: number }>("POST", `/api/sandboxes/${sandboxId}/datasets`, body),
    destroySandbox: (sandboxId: string) => call("DELETE", `/api/sandboxes/${sandboxId}`),
    startBackup: (body: Record<string, unknown>) => call<{ id: string; snapshotId: string; strategy: string }>("POST", "/api/backups", body),
    startRestore: (body: Record<string, unknown>) => call<{ id: string; strategy: string }>("POST", "/api/restores", body),
    backup: (id: string) => call<RunStatus>("GET", `/api/backups/${id}`),
    restore: (id: string) => call<RunStatus>("GET", `/api/restores/${id}`),
    /** Follows a run until it ends, reporting each step as it completes (each request held until something changes). */
    async waitFor(kind: "backup" | "restore", id: string, onStep: (name: string, step: RunStatus["steps"][string]) => void, timeoutMs = 30 * 60_000): Promise<RunStatus> {
      const seen = new Set<string>();
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const s = await call<RunStatus>("GET", `/api/${kind}s/${id}?wait=${STATUS_WAIT_SECONDS}`);
        for (const [name, step] of Object.entries(s.steps)) {
          if (!seen.has(name)) {
            seen.add(name);
            onStep(name, step);
          }
        }
        if (["complete", "errored", "terminated", "cancelled"].includes(s.status)) return s;
        if (Date.now() > deadline) throw new Error(`${kind} ${id} still ${s.status} after ${timeoutMs / 1000} s`);
      }
    },
  };
}
