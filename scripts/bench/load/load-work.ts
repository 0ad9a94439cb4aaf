// The load run's work, through the public API only: datasets in N source sandboxes and a first snapshot of each;
// then N backups and N restores (of those snapshots, into N fresh sandboxes) all at once; then a matrix of many
// small runs. Each step reports what finished, and what failed with its error, rather than stopping at the first.
import type { apiClient, RunStatus } from "../../cli/api-client.ts";

type Api = ReturnType<typeof apiClient>;

export interface LoadShape {
  /** backups and restores at once (each) */
  parallel: number;
  dataset: { kind: "node-modules"; files: number; bytes: number };
  matrix: Record<string, unknown>;
}

const PATH = "/workspace/app";

/** 5 cells × 20 runs of a tiny tree: archives and images, through the Worker and presigned, extracts and mounts. */
export const LOAD_MATRIX = {
  name: "load",
  datasets: [{ name: "tiny", kind: "node-modules", seed: 2, files: 200, bytes: 2_000_000 }],
  backups: ["tar-zst-pipe", "tar-zst-direct", "squashfs-lz4"],
  pairs: [
    { backup: "tar-zst-pipe", restore: "presigned-tar-zst-pipe" },
    { backup: "tar-zst-pipe", restore: "restore-tar-zst-pipe" },
    { backup: "tar-zst-direct", restore: "presigned-tar-zst-pipe" },
    { backup: "squashfs-lz4", restore: "presigned-squashfuse-mount" },
    { backup: "squashfs-lz4", restore: "presigned-squashfs-extract" },
  ],
  runs: 20,
  isolated: true,
  dropCaches: false,
  concurrency: 2,
};

export const LOAD_SHAPE: LoadShape = { parallel: 8, dataset: { kind: "node-modules", files: 1500, bytes: 15_000_000 }, matrix: LOAD_MATRIX };

export interface RunOutcome {
  kind: "backup" | "restore";
  id: string;
  sandboxId: string;
  strategy: string;
  status: string;
  ms: number;
  snapshotId?: string;
  error?: string;
}

/** Every other source is an image (a mount restore), the rest tar archives (an extract). */
const backupStrategy = (i: number) => (i % 2 ? "squashfs-lz4" : "tar-zst-pipe");
const restoreStrategy = (i: number) => (i % 2 ? "presigned-squashfuse-mount" : "presigned-tar-zst-pipe");

async function settle(api: Api, kind: "backup" | "restore", id: string, deadlineMs = 15 * 60_000): Promise<RunStatus> {
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    const s = kind === "backup" ? await api.backup(id) : await api.restore(id);
    if (["complete", "errored", "terminated"].includes(s.status)) return s;
    if (Date.now() > deadline) return { ...s, error: `still ${s.status} after ${deadlineMs / 1000} s` };
    await new Promise((r) => setTimeout(r, 1000));
  }
}

async function timedRun(api: Api, kind: "backup" | "restore", sandboxId: string, body: Record<string, unknown>, strategy: string): Promise<RunOutcome> {
  const t = Date.now();
  try {
    const started: { id: string; snapshotId?: string } = kind === "backup" ? await api.startBackup(body) : await api.startRestore(body);
    const s = await settle(api, kind, started.id);
    const snapshotId = started.snapshotId ?? s.snapshotId;
    return { kind, id: started.id, sandboxId, strategy, status: s.status, ms: Date.now() - t, ...(snapshotId ? { snapshotId } : {}), ...(s.status === "complete" ? {} : { error: s.error ?? s.status }) };
  } catch (e) {
    return { kind, id: "", sandboxId, strategy, status: "refused", ms: Date.now() - t, error: e instanceof Error ? e.message : String(e) };
  }
}

export async function makeSources(api: Api, stamp: string, shape: LoadShape): Promise<string[]> {
  const sources = Array.from({ length: shape.parallel }, (_, i) => `load-${stamp}-src-${i}`);
  await Promise.all(sources.map((s, i) => api.generateDataset(s, { path: PATH, ...shape.dataset, seed: 10 + i })));
  return sources;
}

/** The snapshots the restores will read, one per source, made before the load starts. */
export async function firstSnapshots(api: Api, sources: string[]): Promise<RunOutcome[]> {
  return Promise.all(sources.map((s, i) => timedRun(api, "backup", s, { sandboxId: s, path: PATH, strategy: backupStrategy(i) }, backupStrategy(i))));
}

/** N backups (the sources again) and N restores (the first snapshots, into fresh sandboxes), all started at once. */
export async function backupsAndRestores(api: Api, stamp: string, sources: string[], firsts: RunOutcome[], onDone: (o: RunOutcome, finished: number) => void): Promise<{ outcomes: RunOutcome[]; targets: string[] }> {
  const targets = sources.map((_, i) => `load-${stamp}-dst-${i}`);
  let finished = 0;
  const report = (o: RunOutcome) => (onDone(o, ++finished), o);
  const outcomes = await Promise.all([
    ...sources.map((s, i) => timedRun(api, "backup", s, { sandboxId: s, path: PATH, strategy: backupStrategy(i) }, backupStrategy(i)).then(report)),
    ...targets.map((t, i) => timedRun(api, "restore", t, { snapshotId: firsts[i]!.snapshotId, sandboxId: t, path: PATH, strategy: restoreStrategy(i) }, restoreStrategy(i)).then(report)),
  ]);
  return { outcomes, targets };
}

export interface MatrixOutcome {
  id: string;
  ms: number;
  progress: { total: number; done: number; failed: number; sent: number; status: string; deadLettered: { reason: string }[] };
  summary: { rows: { cell: { backup: string; restore: string }; n: number; failures: { run: number; error: string }[] }[] };
}

export async function runMatrix(api: Api, spec: Record<string, unknown>, onProgress: (p: MatrixOutcome["progress"]) => void, deadlineMs = 30 * 60_000): Promise<MatrixOutcome> {
  const t = Date.now();
  const { id } = await api.call<{ id: string }>("POST", "/api/matrices", spec);
  for (;;) {
    const view = await api.call<Omit<MatrixOutcome, "id" | "ms">>("GET", `/api/matrices/${id}`);
    onProgress(view.progress);
    if (view.progress.status === "complete" || Date.now() - t > deadlineMs) return { id, ms: Date.now() - t, ...view };
    await new Promise((r) => setTimeout(r, 2000));
  }
}

/** Ends the load's sandboxes (their trees, and the restores' mounts). */
export async function endSandboxes(api: Api, ids: string[]): Promise<string[]> {
  const errors: string[] = [];
  for (const id of ids) await api.destroySandbox(id).catch((e: Error) => errors.push(`${id}: ${e.message}`));
  return errors;
}
