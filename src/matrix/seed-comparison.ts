// Our medians beside the seed reports' published figures, one row per seed preset in a matrix's summary, with the
// ratio ours / theirs. A backup preset is compared on what the seeds timed (archive + transfer: backup.core), a
// restore preset on transfer + materialize (restore.core); our full totals (with manifest and verify) are shown
// beside. Pure.
import { NOT_MEASURED_BY_A_MATRIX, SEED_FIGURES } from "./seed-figures.ts";
import type { Summary } from "./summary.ts";

export interface ComparisonRow {
  preset: string;
  phase: "backup" | "restore";
  /** our median seconds of what the seeds timed (core), and of our whole phase (total) */
  ours: number | null;
  oursTotal: number | null;
  n: number;
  failures: string[];
  theirs: { seconds: number | null; where: string; seed: string; note?: string }[];
}

export function seedComparison(summary: Summary): ComparisonRow[] {
  const rows: ComparisonRow[] = [];
  for (const [preset, figures] of Object.entries(SEED_FIGURES)) {
    for (const phase of ["backup", "restore"] as const) {
      // A figure counts only on the dataset that reproduces its workload. Seed 003 published a restore time per
      // backup technique: that is the restore of the cell whose backup is the preset.
      const theirs = figures.filter((f) => f.phase === phase && summary.rows.some((r) => r.cell.dataset === f.dataset));
      if (!theirs.length) continue;
      const cells = summary.rows.filter((r) => theirs.some((f) => f.dataset === r.cell.dataset) && (r.cell[phase] === preset || r.cell.backup === preset));
      if (!cells.length) continue;
      // The cell with the most successful runs speaks for the preset.
      const best = [...cells].sort((a, b) => b.n - a.n)[0]!;
      const core = best.phases[`${phase}.core`];
      const total = best.phases[`${phase}.total`];
      rows.push({
        preset, phase, ours: core?.median !== undefined ? core.median / 1000 : null, oursTotal: total?.median !== undefined ? total.median / 1000 : null, n: best.n,
        failures: cells.flatMap((c) => c.failures.map((f) => f.error)),
        theirs: theirs.map(({ seconds, where, seed, note }) => ({ seconds, where, seed, ...(note ? { note } : {}) })),
      });
    }
  }
  return rows;
}

/** Seed presets with published figures that this summary has no row for, with the reason when there is one. */
export function seedPresetsNotMeasured(summary: Summary): { preset: string; reason: string }[] {
  const measured = new Set(seedComparison(summary).map((r) => r.preset));
  return Object.keys(SEED_FIGURES)
    .filter((p) => !measured.has(p))
    .map((preset) => ({ preset, reason: NOT_MEASURED_BY_A_MATRIX[preset] ?? "not measured on its seed's workload in this matrix (see the other results files)" }));
}

export function seedComparisonMarkdown(rows: ComparisonRow[]): string {
  const lines = [
    "| preset | phase | ours: median s (n) | ours, whole phase s | seed: s | where (seed report) | ours / seed |",
    "| --- | --- | --: | --: | --: | --- | --: |",
  ];
  for (const r of rows) {
    r.theirs.forEach((t, i) => {
      const ours = i > 0 ? "" : r.ours === null ? `failed: ${r.failures[0]?.slice(0, 80) ?? "no run"}` : `${r.ours.toFixed(2)} (${r.n})`;
      const ratio = r.ours !== null && t.seconds ? (r.ours / t.seconds).toFixed(2) : "—";
      const whole = i > 0 || r.oursTotal === null ? "" : r.oursTotal.toFixed(2);
      lines.push(`| ${i ? "" : `\`${r.preset}\``} | ${i ? "" : r.phase} | ${ours} | ${whole} | ${t.seconds ?? t.note ?? "—"} | ${t.where} (${t.seed}) | ${ratio} |`);
    });
  }
  return lines.join("\n") + "\n";
}
