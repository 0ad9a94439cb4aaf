// The sleep-wake bench's view of background compactions (issue 24; workflows/compact-workflow.ts): after each sleep,
// whether it started one (GET /api/compactions/:deltaId); between cycles, which ended, how long each took (its
// steps' wall clock: wake in the compactor sandbox, then the whole chunked backup) and what it uploaded (the chunks
// the store lacked). Never waited for during the cycles: only at the end, before the garbage collection.
import type { apiClient } from "../../cli/api-client.ts";

type Api = ReturnType<typeof apiClient>;

interface CompactionStatus {
  id: string;
  status: "none" | "running" | "complete" | "errored" | "removed";
  error?: string;
  steps?: Record<string, { startedAt?: number; endedAt?: number; ms?: number; engineMs?: number; walkMs?: number; agentMs?: number }>;
  compaction?: { id: string; chunks?: { imageBytes: number; uploadedBytes: number }; archive?: { bytes: number }; files?: { pack?: { bytes: number }; read?: { files: number; bytes: number } } };
}

export interface CompactionRun {
  /** the delta it compacts, and the cycle whose sleep made it */
  delta: string;
  id: string;
  afterCycle: number;
  /** the cycle during which it was seen ended (0: at the end of the run) */
  endedBy?: number;
  status: CompactionStatus["status"];
  error?: string;
  /** first step's start → last step's end */
  wallMs?: number;
  imageBytes?: number;
  uploadedBytes?: number;
  /** a file-level compaction: the files it read (the rest kept the base's chunk lists unread) */
  readFiles?: number;
  /** each step's wall clock (ms), "restore transfer", "backup archive" …: where a compaction's time goes */
  steps?: Record<string, number>;
  /** inside two steps: the engine's pass and its walk (backup transfer), the agent's comparison (compaction verify) */
  engineMs?: number;
  walkMs?: number;
  checkAgentMs?: number;
}

const wallOf = (steps: CompactionStatus["steps"] = {}) => {
  const s = Object.values(steps);
  const start = Math.min(...s.map((x) => x.startedAt ?? Infinity));
  const end = Math.max(...s.map((x) => x.endedAt ?? -Infinity));
  return Number.isFinite(start) && Number.isFinite(end) ? end - start : undefined;
};

export function compactionWatch(api: Api) {
  const runs: CompactionRun[] = [];
  const get = (delta: string) => api.call<CompactionStatus>("GET", `/api/compactions/${delta}`);
  const settle = async (r: CompactionRun, cycle: number) => {
    const s = await get(r.delta);
    if (s.status === "running" || s.status === "none") return false;
    const steps = Object.fromEntries(Object.entries(s.steps ?? {}).flatMap(([name, x]) => (x.ms === undefined ? [] : [[name, x.ms]])));
    Object.assign(r, { status: s.status, endedBy: cycle, wallMs: wallOf(s.steps), steps, ...(s.error ? { error: s.error } : {}) });
    const transfer = s.steps?.["backup transfer"], check = s.steps?.["compaction verify"];
    if (transfer?.engineMs !== undefined) Object.assign(r, { engineMs: transfer.engineMs, walkMs: transfer.walkMs });
    if (check?.agentMs !== undefined) r.checkAgentMs = check.agentMs;
    if (s.compaction?.chunks) Object.assign(r, { imageBytes: s.compaction.chunks.imageBytes, uploadedBytes: s.compaction.chunks.uploadedBytes });
    // A file-level compaction uploads its pack (what the deltas changed) and its index; it has no image.
    else if (s.compaction?.files) Object.assign(r, { uploadedBytes: (s.compaction.files.pack?.bytes ?? 0) + (s.compaction.archive?.bytes ?? 0), readFiles: s.compaction.files.read?.files });
    return true;
  };
  return {
    runs,
    /** after a sleep: did it start a compaction? */
    async afterSleep(delta: string, cycle: number): Promise<CompactionRun | undefined> {
      const s = await get(delta);
      if (s.status === "none") return undefined;
      const r: CompactionRun = { delta, id: s.id, afterCycle: cycle, status: s.status };
      runs.push(r);
      await settle(r, cycle);
      return r;
    },
    /** the compactions that ended since the last look */
    async ended(cycle: number): Promise<CompactionRun[]> {
      const done: CompactionRun[] = [];
      for (const r of runs.filter((x) => x.endedBy === undefined)) if (await settle(r, cycle)) done.push(r);
      return done;
    },
    /** waits for every compaction still running (the end of the run) */
    async drain(timeoutMs: number): Promise<void> {
      const deadline = performance.now() + timeoutMs;
      while (runs.some((x) => x.endedBy === undefined) && performance.now() < deadline) {
        for (const r of runs.filter((x) => x.endedBy === undefined)) await settle(r, 0);
        await new Promise((res) => setTimeout(res, 1000));
      }
    },
  };
}

/**
 * Deletes every snapshot the tip does not need, as retention would with "keep the latest": newest first, again
 * while any goes (a link goes once what needed it went, or once a compaction covers it; a refusal, 409, keeps it),
 * then collects the chunks nothing references (grace 0: nothing else runs on the bench's stack).
 */
export async function collectAllButTip(api: Api, tip: string, ids: string[]): Promise<{ deleted: string[]; kept: string[] }> {
  const left = ids.filter((id) => id !== tip).reverse();
  const deleted: string[] = [];
  for (let progress = true; progress; ) {
    progress = false;
    for (const id of [...left]) {
      try {
        await api.call("DELETE", `/api/snapshots/${id}`);
        left.splice(left.indexOf(id), 1);
        deleted.push(id);
        progress = true;
      } catch (e) {
        if ((e as { status?: number }).status !== 409) throw e;
      }
    }
  }
  await api.call("POST", "/api/chunks/gc", { graceSeconds: 0 });
  return { deleted, kept: [tip, ...left] };
}
