// The summary's table as plain cells, once: summary.md (Markdown) and the results page (HTML) render the same
// columns from it.
import type { Summary } from "./summary-types.ts";

const secs = (ms: number | undefined) => (ms === undefined ? "—" : `${(ms / 1000).toFixed(2)} s`);

export const SUMMARY_HEAD = ["dataset", "backup", "restore", "n", "archive MB", "backup total", "transfer MB/s", "restore total", "restore MB/s", "sandbox start", "failures"];

/** One row of cells per cell of the matrix: medians with (min–max), MB/s, failures with their errors. */
export function summaryCells(summary: Summary): string[][] {
  return summary.rows.map((r) => {
    const range = (k: string) => {
      const p = r.phases[k];
      return p?.n ? `${secs(p.median)} (${secs(p.min)}–${secs(p.max)})` : "—";
    };
    return [
      r.cell.dataset, r.cell.backup, r.cell.restore, String(r.n), r.archiveBytes ? (r.archiveBytes / 1e6).toFixed(1) : "—",
      range("backup.total"), String(r.backupMBps ?? "—"), range("restore.total"), String(r.restoreMBps ?? "—"), range("sandbox.start"),
      r.failures.map((f) => `run ${f.run}: ${f.error}`).join("; "),
    ];
  });
}

const BREAKDOWN = [
  ...["probe", "archive", "transfer", "verify", "record", "overhead"].map((p) => `backup.${p}`),
  ...["probe", "transfer", "materialize", "verify", "overhead"].map((p) => `restore.${p}`),
];
export const BREAKDOWN_HEAD = ["dataset", "backup", "restore", ...BREAKDOWN.map((k) => k.replace(".", " "))];

/** Where the time goes: per cell, the median seconds of each phase (and of the overhead no phase measured). */
export function breakdownCells(summary: Summary): string[][] {
  const median = (r: Summary["rows"][number], k: string) => {
    const m = r.phases[k]?.median;
    return m === undefined ? "—" : (m / 1000).toFixed(2);
  };
  return summary.rows.map((r) => [r.cell.dataset, r.cell.backup, r.cell.restore, ...BREAKDOWN.map((k) => median(r, k))]);
}
