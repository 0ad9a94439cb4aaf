// The forks bench's results (run-forks.ts) and their Markdown: first use and the two moments of a lazy restore
// beside the download-then-mount restore, each fork's upload and wall time, and what N forks cost in the store
// against N + 1 full archives, with issue 10's targets marked met or missed. Pure.
import { stats } from "../../../src/matrix/median.ts";
import type { FirstUse } from "./first-use.ts";

export interface ForkRun {
  /** the fork's overlay-delta backup: POST → complete */
  ms: number;
  steps: Record<string, number>;
  /** the lazy-overlay-restore that opened the fork: POST → complete, and its usable moment */
  restoreMs: number;
  usableMs?: number;
  /** that restore's steps up to usable (first-use.ts toUsable) */
  toUsable?: Record<string, number>;
  /** the delta archive's size: what went up */
  uploadedBytes: number;
  snapshotId: string;
}

/** The first fork backed up whole (squashfs-chunked): the image rebuilt, only chunks the store lacked uploaded. */
export interface WholeFork {
  ms: number;
  steps: Record<string, number>;
  imageBytes: number;
  uploadedBytes: number;
  distinct: number;
  uploadedChunks: number;
}

export interface ForksDataset {
  name: string;
  bytes: number;
  entries: number;
  firstUse: { marker: string; command: string };
  fullArchiveBytes?: number;
  mountRestoreMs?: number;
  parent?: { ms: number; imageBytes: number; uploadedBytes: number; distinct: number; uploadedChunks: number };
  firstUseRun?: FirstUse;
  forks: ForkRun[];
  wholeFork?: WholeFork;
  /** the first fork's delta restored into a fresh sandbox (lazy-overlay-restore) */
  forkRestore?: { ms: number; usableMs?: number; completeMs?: number; toUsable?: Record<string, number> };
  storedChunkBytes?: number;
  storedDeltaBytes?: number;
}

export interface ForksResults {
  name: string;
  date: string;
  machine: string;
  forks: number;
  changeBytes: number;
  datasets: ForksDataset[];
  errors: string[];
  /** os.loadavg() (1, 5, 15 min) when the bench started and ended: the machine may be shared */
  load?: { start: number[]; end: number[]; cores: number };
}

const s = (ms: number | undefined) => (ms === undefined ? "—" : (ms / 1000).toFixed(2));
const mb = (b: number | undefined) => (b === undefined ? "—" : (b / 1e6).toFixed(1));
const verdict = (ok: boolean | undefined) => (ok === undefined ? "not measured" : ok ? "met" : "**missed**");

const STEPS = ["probe", "archive", "transfer", "verify", "record"];

/** Each step's median over the forks' backups, and the median of what no step accounts for. */
function forkSteps(forks: ForkRun[]): string {
  const median = (xs: number[]) => stats(xs).median ?? 0;
  const steps = STEPS.map((k) => median(forks.map((f) => f.steps[k] ?? 0)));
  const outside = median(forks.map((f) => f.ms - Object.values(f.steps).reduce((a, b) => a + b, 0)));
  return `${steps.map((ms) => s(ms)).join(" / ")}; ${s(outside)} s`;
}

export function forksMarkdown(r: ForksResults): string {
  const out = [
    `# ${r.name} (${r.date}): lazy restores, first use and forks`,
    "",
    `Machine: ${r.machine}. One run of each operation per dataset, ${r.forks} forks; every operation after a \`sync\`. ` +
      "Times are wall seconds through the HTTP API (POST → complete, each status request held until a step or the run ends: seen within ~20 ms), or as stated. Emulator figures: compare only within this file.",
    ...(r.load ? ["", `Load average (1, 5, 15 min) at the start: ${r.load.start.map((x) => x.toFixed(2)).join(", ")}; at the end: ${r.load.end.map((x) => x.toFixed(2)).join(", ")} (${r.load.cores} cores).`] : []),
    "",
  ];
  for (const d of r.datasets) {
    out.push(`## ${d.name}: ${mb(d.bytes)} MB, ${d.entries} entries`, "");
    const f = d.firstUseRun;
    const image = d.parent?.imageBytes;
    out.push("| what | figure |", "| --- | --: |");
    out.push(`| full archive (${"tar-zst-pipe"}) | ${mb(d.fullArchiveBytes)} MB |`);
    out.push(`| chunked image (squashfs-chunked), uploaded whole into an empty store | ${mb(image)} MB in ${s(d.parent?.ms)} s |`);
    out.push(`| download-then-mount restore (squashfs-zstd-3 → presigned-squashfs-mount), POST → complete | ${s(d.mountRestoreMs)} s |`);
    if (f) {
      out.push(`| lazy restore: the tree answers at the target (POST → \`${d.firstUse.marker}\` seen) | ${s(f.usableSeenMs)} s (the Workflow's usableMs: ${s(f.usableMs)}) |`);
      if (f.toUsable) out.push(`| … of which (ms) | ${Object.entries(f.toUsable).map(([k, v]) => `${k.replace(/Ms$/, "")} ${v}`).join(", ")} |`);
      out.push(`| first use \`${d.firstUse.command}\` at the target: its own time; POST → done | ${s(f.commandMs)} s; ${s(f.firstUseDoneMs)} s |`);
      out.push(`| bytes local when first use was done (all fetched by then, prefetch included) | ${mb(f.atFirstUse.localBytes)} MB = ${((100 * f.atFirstUse.localBytes) / f.atFirstUse.imageBytes).toFixed(1)} % of ${mb(f.atFirstUse.imageBytes)} MB |`);
      out.push(`| of which the mount at the target asked for on demand | ${mb(f.atFirstUse.onDemandBytes)} MB (${f.atFirstUse.onDemandChunks} chunks); ahead: ${mb(f.atFirstUse.aheadBytes)} MB |`);
      out.push(`| the chunks the mount had read from by then (first use and the verify step's walk), whoever fetched them | ${mb(f.atFirstUse.readBytes)} MB (${f.atFirstUse.readChunks} chunks) = ${((100 * f.atFirstUse.readBytes) / f.atFirstUse.imageBytes).toFixed(1)} % |`);
      out.push(`| lazy restore complete (every chunk local and verified), POST → complete | ${s(f.completeMs)} s (Workflow: ${s(f.workflowCompleteMs)}) |`);
    }
    if (d.forks.length) {
      const up = stats(d.forks.map((x) => x.uploadedBytes));
      const t = stats(d.forks.map((x) => x.ms));
      const opened = stats(d.forks.map((x) => x.restoreMs));
      const usable = stats(d.forks.flatMap((x) => (x.usableMs === undefined ? [] : [x.usableMs])));
      out.push(`| fork opened writable (lazy-overlay-restore of the parent): usable; complete — medians of ${d.forks.length} | ${s(usable.median)} s; ${s(opened.median)} s |`);
      const parts = medianParts(d.forks.flatMap((x) => (x.toUsable ? [x.toUsable] : [])));
      if (parts) out.push(`| … of which (ms, medians) | ${parts} |`);
      out.push(`| fork backup (overlay-delta) after a ${mb(r.changeBytes)} MB change: uploaded, median (min–max) | ${mb(up.median)} MB (${mb(up.min)}–${mb(up.max)}) |`);
      out.push(`| fork backup (overlay-delta): POST → complete, median (min–max) | ${s(t.median)} s (${s(t.min)}–${s(t.max)}) |`);
      out.push(`| … where its time went, medians: ${STEPS.join(" / ")}; outside the steps (the run's start, step bookkeeping, polling) | ${forkSteps(d.forks)} |`);
      if (d.wholeFork) out.push(`| the first fork backed up whole instead (squashfs-chunked: image rebuilt, new chunks only) | ${mb(d.wholeFork.uploadedBytes)} MB (${d.wholeFork.uploadedChunks}/${d.wholeFork.distinct} chunks) in ${s(d.wholeFork.ms)} s |`);
      if (d.forkRestore) out.push(`| the first fork's delta restored into a fresh sandbox (lazy-overlay-restore): usable; complete | ${s(d.forkRestore.usableMs)} s; ${s(d.forkRestore.ms)} s |`);
      if (d.forkRestore?.toUsable) out.push(`| … of which (ms) | ${medianParts([d.forkRestore.toUsable])} |`);
      const n = d.forks.length + 1;
      const stored = d.storedChunkBytes === undefined ? undefined : d.storedChunkBytes + (d.storedDeltaBytes ?? 0);
      out.push(`| stored after the parent and ${d.forks.length} forks: chunks + delta archives | ${mb(d.storedChunkBytes)} + ${mb(d.storedDeltaBytes)} = ${mb(stored)} MB |`);
      out.push(`| ${n} full archives (tar-zst-pipe) / ${n} full images | ${mb(d.fullArchiveBytes && d.fullArchiveBytes * n)} MB / ${mb(image && image * n)} MB |`);
    }
    out.push("");
    out.push("| target (issue 10) | measured | |", "| --- | --: | --- |");
    if (f) {
      const share = f.atFirstUse.onDemandBytes / f.atFirstUse.imageBytes;
      out.push(`| ≤ 0.5 s from the restore request to usable | ${s(f.usableSeenMs)} s | ${verdict(f.usableSeenMs <= 500)} |`);
      afterMaterialize(out, "lazy restore", f.toUsable?.usableAfterMaterializeMs);
      out.push(`| bytes fetched on demand before first use ≤ 10 % of the image | ${(100 * share).toFixed(1)} % | ${verdict(share <= 0.1)} |`);
      out.push(`| bytes the mount read before first use was done (fetched on demand or ahead) ≤ 10 % | ${((100 * f.atFirstUse.readBytes) / f.atFirstUse.imageBytes).toFixed(1)} % | ${verdict(f.atFirstUse.readBytes / f.atFirstUse.imageBytes <= 0.1)} |`);
      out.push(`| all bytes local at first use (prefetch included) ≤ 10 % | ${((100 * f.atFirstUse.localBytes) / f.atFirstUse.imageBytes).toFixed(1)} % | ${verdict(f.atFirstUse.localBytes / f.atFirstUse.imageBytes <= 0.1)} |`);
      if (d.mountRestoreMs) out.push(`| complete ≤ 1.2 × the download-then-mount restore | ${(f.completeMs / d.mountRestoreMs).toFixed(2)} × | ${verdict(f.completeMs <= 1.2 * d.mountRestoreMs)} |`);
    }
    if (d.forks.length) {
      const up = stats(d.forks.map((x) => x.uploadedBytes)).median!;
      const t = stats(d.forks.map((x) => x.ms)).median!;
      afterMaterialize(out, `fork opened writable (median of ${d.forks.length})`, stats(d.forks.flatMap((x) => (x.toUsable?.usableAfterMaterializeMs === undefined ? [] : [x.toUsable.usableAfterMaterializeMs]))).median);
      afterMaterialize(out, "fork's delta restored", d.forkRestore?.toUsable?.usableAfterMaterializeMs);
      out.push(`| a fork with ${mb(r.changeBytes)} MB changed uploads ≤ 20 MB | ${mb(up)} MB | ${verdict(up <= 20e6)} |`);
      out.push(`| … and backs up in ≤ 1 s end to end | ${s(t)} s | ${verdict(t <= 1000)} |`);
    }
    out.push("");
  }
  if (r.errors.length) out.push("## Failures", "", ...r.errors.map((e) => `- ${e.replace(/\n/g, " ")}`), "");
  return out.join("\n");
}

/**
 * The target row for usable ≤ 0.1 s after the materialization starts (usableAfterMaterializeMs: from the materialize
 * step's start, or for a tree the transfer swapped in — a lazy restore's — from the start of its materialization
 * inside that step, once the index was in).
 */
function afterMaterialize(out: string[], what: string, ms: number | undefined) {
  if (ms !== undefined) out.push(`| ${what}: usable ≤ 0.1 s after its materialization starts (its start → the tree answers at the target) | ${s(ms)} s | ${verdict(ms <= 100)} |`);
}

/** "probe 34, transfer 11, …": each part's median over the runs that report it. */
function medianParts(runs: Record<string, number>[]): string | undefined {
  const keys = [...new Set(runs.flatMap((r) => Object.keys(r)))];
  if (!keys.length) return undefined;
  return keys.map((k) => `${k.replace(/Ms$/, "")} ${stats(runs.flatMap((r) => (r[k] === undefined ? [] : [r[k]!]))).median}`).join(", ");
}
