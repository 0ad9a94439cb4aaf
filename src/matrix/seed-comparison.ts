// Our medians beside the seed reports' published figures, one row per seed preset in a matrix's summary, with the
// ratio ours / theirs. A backup preset is compared on its backup total, a restore preset on its restore total.
// Pure.
import { SEED_FIGURES } from "./seed-figures.ts";
import type { Summary } from "./summary.ts";

export interface ComparisonRow {
  preset: string;
  phase: "backup" | "restore";
  /** our median seconds, or why there is none */
  ours: number | null;
  n: number;
  failures: string[];
  theirs: { seconds: number | null; where: string; seed: string; note?: string }[];
}

export function seedComparison(summary: Summary): ComparisonRow[] {
  const rows: ComparisonRow[] = [];
  for (const [preset, figures] of Object.entries(SEED_FIGURES)) {
    for (const phase of ["backup", "restore"] as const) {
      const theirs = figures.filter((f) => f.phase === phase);
      if (!theirs.length) continue;
      const cells = summary.rows.filter((r) => (phase === "backup" ? r.cell.backup : r.cell.restore) === preset);
      if (!cells.length) continue;
      // The cell with the most successful runs speaks for the preset.
      const best = [...cells].sort((a, b) => b.n - a.n)[0]!;
      const st = best.phases[`${phase}.total`];
      rows.push({
        preset, phase, ours: st?.median !== undefined ? st.median / 1000 : null, n: best.n,
        failures: cells.flatMap((c) => c.failures.map((f) => f.error)),
        theirs: theirs.map(({ seconds, where, seed, note }) => ({ seconds, where, seed, ...(note ? { note } : {}) })),
      });
    }
  }
  return rows;
}

export function seedComparisonMarkdown(rows: ComparisonRow[]): string {
  const lines = [
    "| preset | phase | ours: median s (n) | seed: s | where (seed report) | ours / seed |",
    "| --- | --- | --: | --: | --- | --: |",
  ];
  for (const r of rows) {
    r.theirs.forEach((t, i) => {
      const ours = i > 0 ? "" : r.ours === null ? `failed: ${r.failures[0]?.slice(0, 80) ?? "no run"}` : `${r.ours.toFixed(2)} (${r.n})`;
      const ratio = r.ours !== null && t.seconds ? (r.ours / t.seconds).toFixed(2) : "—";
      lines.push(`| ${i ? "" : `\`${r.preset}\``} | ${i ? "" : r.phase} | ${ours} | ${t.seconds ?? t.note ?? "—"} | ${t.where} (${t.seed}) | ${ratio} |`);
    });
  }
  return lines.join("\n") + "\n";
}
