// What a peers race records, and the targets it is judged against (issues 23 and 24). Pure.
import { median, stats } from "../../../src/matrix/median.ts";

export type Who = "floor" | "restic" | "snapflow";

/** The parts of the stack a span's CPU-seconds are billed to (stack-cpu.ts says what each holds). */
export const CPU_PARTS = ["agent", "engine", "worker", "wrangler", "store", "commands"] as const;
export type CpuPart = (typeof CPU_PARTS)[number];
/** what `total` adds up: every part but wrangler dev's own Node process, which has no production counterpart */
export const TOTAL_PARTS: readonly CpuPart[] = CPU_PARTS.filter((p) => p !== "wrangler");
/** seconds per part, and the total of TOTAL_PARTS */
export type CpuSeconds = Record<CpuPart | "total", number>;

/**
 * What the race's own status polls (every POLL_MS until complete) cost the stack, estimated: right after the run,
 * its completed status is polled `calibrationPolls` more times at the same pace and the CPU each poll took is
 * measured. A poll costs workerd 10–20 ms here, so at 10 polls a second they would otherwise be most of the Worker's
 * figure on a short run.
 */
export interface Polling {
  polls: number;
  calibrationPolls: number;
  /** CPU-seconds per poll */
  workerPerPoll: number;
  wranglerPerPoll: number;
}

export interface Sample {
  /** wall milliseconds: the command's, or POST → complete for snapflow */
  ms: number;
  /** snapflow: each step's own milliseconds, as its API reports them */
  steps?: Record<string, number>;
  /** snapflow: nested timings inside a step (e.g. archive.manifest), flattened as "archive.manifest" */
  substeps?: Record<string, number>;
  /** CPU-seconds per process over the same span (stack-cpu.ts); absent when a part restarted meanwhile, or in older files */
  cpu?: CpuSeconds;
  /** snapflow: the status polls in that span and their estimated cost, which the reported figures leave out */
  polling?: Polling;
  /** a backup's archive bytes (the most its archive and transfer steps report), for the Worker's CPU per GB */
  archiveBytes?: number;
  /** anything else worth keeping: run ids, bytes, restic's summary */
  detail?: Record<string, unknown>;
}

export interface PeerRow {
  id: string;
  label: string;
  who: Who;
  command: string;
  samples: Sample[];
}

export interface DatasetResult {
  name: string;
  description: string;
  entries: number;
  /** apparent size (du -sb) and space used on disk (du -sk) */
  bytes: number;
  diskBytes: number;
  rows: PeerRow[];
  /** an operation that failed: the race goes on without it, and the results say so */
  errors: string[];
}

export interface PeersResults {
  name: string;
  date: string;
  machine: string;
  runs: number;
  change: { bytes: number; seed: number; description: string };
  datasets: DatasetResult[];
}

export const rowStats = (row: PeerRow | undefined) => stats(row?.samples.map((s) => s.ms) ?? []);

/** A sample's CPU-seconds less the race's status polls (estimated, never below 0): the operation's own. */
export function operationCpu(s: Sample): CpuSeconds | undefined {
  if (!s.cpu || !s.polling) return s.cpu;
  const less = (measured: number, perPoll: number) => Math.max(0, measured - s.polling!.polls * perPoll);
  const parts = { ...s.cpu, worker: less(s.cpu.worker, s.polling.workerPerPoll), wrangler: less(s.cpu.wrangler, s.polling.wranglerPerPoll) };
  return { ...parts, total: TOTAL_PARTS.reduce((t, k) => t + parts[k], 0) };
}

/** The Worker CPU-seconds the race's status polls took from a sample (estimated), as operationCpu left them out. */
const pollsCpu = (s: Sample) => (s.cpu && s.polling ? s.cpu.worker - operationCpu(s)!.worker : undefined);

/** One part's CPU-seconds (less the polls), or the polls' own, over the samples that have them: its own median, not the median run's. */
export const cpuStats = (row: PeerRow | undefined, part: CpuPart | "total" | "polls") =>
  stats(row?.samples.flatMap((s) => (part === "polls" ? pollsCpu(s) : operationCpu(s)?.[part]) ?? []) ?? []);

/** The Worker's CPU-seconds (less the polls) per GB (1e9 bytes) of archive, per sample that has both. */
export const workerCpuPerGB = (row: PeerRow | undefined) =>
  row?.samples.flatMap((s) => {
    const cpu = operationCpu(s);
    return cpu && s.archiveBytes ? [cpu.worker / (s.archiveBytes / 1e9)] : [];
  }) ?? [];

/** The sample whose wall time is the median (the lower middle for an even n): its steps add up to its wall. */
export function medianSample(row: PeerRow): Sample | undefined {
  const sorted = [...row.samples].sort((a, b) => a.ms - b.ms);
  return sorted[(sorted.length - 1) >> 1];
}

export interface Ratio {
  name: string;
  /** median of `of`, divided by the median of `over` when given; else in the figure's own unit */
  of: string;
  over?: string;
  /**
   * what is compared: wall seconds (the default), the stack's total CPU-seconds, the Worker's CPU-seconds per GB of
   * archive, or the MB (1e6 bytes) a file-level backup added to the store (its pack, index and manifest)
   */
  figure?: "wall" | "cpu" | "worker-cpu-per-gb" | "stored-mb";
  /** the target: at most this */
  target?: number;
}

// Targets: the open issues' (23: the native engine; 24: the file-level format). Earlier issues' looser targets
// (issue 8: 1.2× the floor, 0.5 s incrementals, …) are met or superseded; the results say which issue each one is.
export const RATIOS: Ratio[] = [
  { name: "snapflow default backup / floor with store (issue 23)", of: "snapflow-backup", over: "floor-store", target: 1.0 },
  { name: "snapflow default backup / restic first backup (issue 23)", of: "snapflow-backup", over: "restic-first", target: 0.5 },
  { name: "snapflow 10 MB incremental, seconds (issue 23)", of: "snapflow-incremental", target: 0.3 },
  { name: "snapflow 10 MB incremental / restic's (issue 23)", of: "snapflow-incremental", over: "restic-incremental", target: 0.15 },
  { name: "snapflow default restore / restore floor (issue 23)", of: "snapflow-restore", over: "floor-restore", target: 1.1 },
  { name: "snapflow fastest mount restore, seconds (issue 23)", of: "snapflow-mount-restore", target: 0.5 },
  // No target; context for the ones above.
  { name: "floor with store / floor to a file (the upload's cost)", of: "floor-store", over: "floor-file" },
  { name: "restic first backup / floor with store", of: "restic-first", over: "floor-store" },
  { name: "restic restore / restore floor", of: "restic-restore", over: "floor-restore" },
  { name: "snapflow mount backup (squashfs-zstd-3) / default backup", of: "snapflow-mount-backup", over: "snapflow-backup" },
  // chunked snapshots and lazy restores
  { name: "snapflow lazy restore usable (request → mount answers), seconds (issue 23)", of: "snapflow-lazy-usable", target: 0.1 },
  { name: "snapflow lazy restore complete / fastest mount restore", of: "snapflow-lazy-restore", over: "snapflow-mount-restore" },
  { name: "snapflow chunked backup after the 10 MB change, seconds (issue 24: ≤ 0.6 s whatever the format)", of: "snapflow-chunked-fork", target: 0.6 },
  { name: "snapflow chunked backup / mount backup (squashfs-zstd-3)", of: "snapflow-chunked-backup", over: "snapflow-mount-backup" },
  { name: "snapflow file-level backup after the 10 MB change, seconds (issue 24)", of: "snapflow-files-incremental", target: 0.6 },
  { name: "snapflow file-level backup of a restored tree after the 10 MB change there (not a fork), seconds (issue 24)", of: "snapflow-files-elsewhere", target: 0.6 },
  { name: "snapflow file-level backup of a restored tree after the 10 MB change there: MB stored (pack, index, manifest if stored) (issue 24)", of: "snapflow-files-elsewhere", figure: "stored-mb", target: 11 },
  { name: "snapflow file-level restore / default restore", of: "snapflow-files-restore", over: "snapflow-restore" },
  // issue 23: CPU-seconds, the figure a shared 2-core machine does not swing
  { name: "stack CPU-seconds per default backup / the floor's with the store (issue 23)", of: "snapflow-backup", over: "floor-store", figure: "cpu", target: 1.1 },
  { name: "Worker CPU-seconds per GB of archive, default backup (issue 23)", of: "snapflow-backup", figure: "worker-cpu-per-gb", target: 0.5 },
];

export interface RatioValue extends Ratio {
  value?: number;
  met?: boolean;
  /** why there is no value */
  missing?: string;
}

/** A row's median of a ratio's figure: wall seconds, total CPU-seconds, or the Worker's CPU-seconds per GB. */
export function figureMedian(row: PeerRow | undefined, figure: Ratio["figure"] = "wall"): number | undefined {
  if (figure === "cpu") return cpuStats(row, "total").median;
  if (figure === "worker-cpu-per-gb") return median(workerCpuPerGB(row));
  if (figure === "stored-mb") return median(row?.samples.flatMap((s) => (typeof s.detail?.storedBytes === "number" ? [s.detail.storedBytes / 1e6] : [])) ?? []);
  const ms = rowStats(row).median;
  return ms === undefined ? undefined : ms / 1000;
}

export function ratios(d: DatasetResult): RatioValue[] {
  const of = (id: string, figure: Ratio["figure"]) => figureMedian(d.rows.find((r) => r.id === id), figure);
  return RATIOS.map((r) => {
    const a = of(r.of, r.figure);
    const b = r.over ? of(r.over, r.figure) : 1;
    if (a === undefined || !b) return { ...r, missing: `${a === undefined ? r.of : r.over} not measured${r.figure && r.figure !== "wall" ? " (CPU)" : ""}` };
    const value = a / b;
    return { ...r, value, ...(r.target !== undefined ? { met: value <= r.target } : {}) };
  });
}
