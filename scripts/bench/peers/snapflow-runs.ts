// snapflow end to end through its HTTP API, as a user meets it: POST a backup or restore, follow it until it ends.
// Wall time runs from just before the POST to the status answer that says it is complete. Followed by `wait` (the
// default: the forks and sleep-wake benches), each status request is held by the API until the run ends
// (`?wait=&until=end`, looked at every 20 ms), so a figure is at most ~20 ms late; by `poll` (the peers race), a status
// GET every POLL_MS, so up to that late — the race keeps polling because its CPU accounting takes the polls' cost
// out of the Worker's figure by counting them (model.ts), and a held request's looking-again inside the Worker
// would not be counted. So a run also says when it ended (its final progress write, endedAt): `endedMs`, from just
// before the POST to that moment on the same clock, is its duration without the following's lateness (this stack
// runs on one machine; the race times runs by it). Each run's per-step milliseconds come from the API as they are.
import { STATUS_WAIT_SECONDS, type apiClient, type RunStatus } from "../../cli/api-client.ts";

export const DEFAULT_BACKUP = "tar-zst-presigned-multipart";
export const INCREMENTAL_BACKUP = "tar-zst-delta";
export const DEFAULT_RESTORE = "presigned-tar-zst-pipe";
/** the fastest mount restore in the seeds' matrix, and the image backup it restores */
export const MOUNT_BACKUP = "squashfs-zstd-3";
export const MOUNT_RESTORE = "presigned-squashfs-mount";
/** chunked snapshots (issue 10): the backup that uploads only new chunks, and the restore usable before download */
export const CHUNKED_BACKUP = "squashfs-chunked";
export const LAZY_RESTORE = "lazy-squashfs";
/** the file-level content-addressed format (issue 24), and its extracting restore */
export const FILES_BACKUP = "files-cas";
export const FILES_RESTORE = "files-extract";
export const POLL_MS = 100;

export interface SnapflowRun {
  kind: "backup" | "restore";
  id: string;
  /** the status GETs it took to see it complete */
  polls: number;
  snapshotId?: string;
  /** from just before the POST to the status answer that said complete (as late as the following) */
  wallMs: number;
  /** from just before the POST to the run's recorded end (endedAt), when the API says it */
  endedMs?: number;
  /** the Workflow's own total, when it reports one */
  totalMs?: number;
  steps: Record<string, number>;
  raw: RunStatus["steps"];
}

type Api = ReturnType<typeof apiClient>;

// Held requests ask for the end only (until=end): an answer at each step would cost the Worker a status of the
// Workflow's instance per step, CPU the run being timed shares.
const status = (api: Api, kind: SnapflowRun["kind"], id: string, wait = 0) => api.call<RunStatus>("GET", `/api/${kind}s/${id}${wait ? `?wait=${wait}&until=end` : ""}`);

export type Following = "wait" | "poll";

/** When a run began, on both clocks: `at` (performance.now) for the wall time seen, `wall` (Date.now) for its recorded end. */
interface Began {
  at: number;
  wall: number;
}
const begin = (): Began => ({ at: performance.now(), wall: Date.now() });

async function follow(api: Api, kind: SnapflowRun["kind"], id: string, t0: Began, how: Following, timeoutMs = 60 * 60_000): Promise<SnapflowRun> {
  for (let polls = 1; ; polls++) {
    const s = await status(api, kind, id, how === "wait" ? STATUS_WAIT_SECONDS : 0);
    if (s.status === "complete") {
      const wallMs = Math.round(performance.now() - t0.at);
      const ended = s.endedAt ? Date.parse(s.endedAt) - t0.wall : NaN;
      const steps = Object.fromEntries(Object.entries(s.steps).map(([k, v]) => [k, v.ms]));
      return { kind, id, polls, snapshotId: s.snapshotId, wallMs, ...(Number.isFinite(ended) && ended > 0 && ended <= wallMs ? { endedMs: ended } : {}), totalMs: s.totalMs, steps, raw: s.steps };
    }
    if (s.status === "errored" || s.status === "terminated") throw new Error(`snapflow ${kind} ${id} ${s.status}: ${s.error ?? "no error message"}`);
    if (performance.now() - t0.at > timeoutMs) throw new Error(`snapflow ${kind} ${id} still ${s.status} after ${timeoutMs / 1000} s`);
    if (how === "poll") await new Promise((r) => setTimeout(r, POLL_MS));
  }
}

export function snapflowRuns(api: Api, how: Following = "wait") {
  return {
    async backup(sandboxId: string, strategy: string, baseSnapshotId?: string, extra: Record<string, unknown> = {}): Promise<SnapflowRun> {
      const t0 = begin();
      const b = await api.startBackup({ sandboxId, path: "/workspace", strategy, ...(baseSnapshotId ? { baseSnapshotId } : {}), ...extra });
      const run = await follow(api, "backup", b.id, t0, how);
      return { ...run, snapshotId: run.snapshotId ?? b.snapshotId };
    },
    /** into /workspace of `sandboxId`, which must be empty */
    async restore(snapshotId: string, sandboxId: string, strategy: string): Promise<SnapflowRun> {
      const t0 = begin();
      const r = await api.startRestore({ snapshotId, sandboxId, path: "/workspace", strategy });
      return follow(api, "restore", r.id, t0, how);
    },
    /** waits until the snapshot's background content check has recorded it (background-check.ts); its wall ms */
    async contentChecked(snapshotId: string, timeoutMs = 10 * 60_000): Promise<number> {
      const t0 = performance.now();
      for (;;) {
        const record = await api.call<{ contentChecked?: unknown }>("GET", `/api/snapshots/${snapshotId}`);
        if (record.contentChecked) return Math.round(performance.now() - t0);
        if (performance.now() - t0 > timeoutMs) throw new Error(`snapshot ${snapshotId} not content-checked after ${timeoutMs / 1000} s`);
        await new Promise((r) => setTimeout(r, POLL_MS));
      }
    },
    /** one more status poll of a run, as follow() makes them (to measure what a poll costs) */
    poll: (run: SnapflowRun) => status(api, run.kind, run.id),
    /** deletes snapshots and collects the chunks only they had (grace 0: nothing else runs on the race's stack) */
    async forgetChunked(snapshotIds: string[]): Promise<void> {
      for (const id of snapshotIds) await api.call("DELETE", `/api/snapshots/${id}`);
      await api.call("POST", "/api/chunks/gc", { graceSeconds: 0 });
    },
    /** unmounts what a mount restore left and ends the sandbox */
    async dispose(sandboxId: string, mounted: boolean): Promise<void> {
      if (mounted) await api.call("DELETE", `/api/sandboxes/${sandboxId}/mounts?path=${encodeURIComponent("/workspace")}`);
      await api.destroySandbox(sandboxId);
    },
  };
}
