// The summary as standalone SVG (no script, no external fonts or CDN): per cell, one stacked bar for the backup and
// one for the restore, each segment the median of one phase (probe, archive, transfer, …, and the overhead no phase
// measured as work: step scheduling, retries), so a reader sees where the time goes. The whisker after a bar spans
// the min–max of the whole run. Used by the results page and the CLI's results/ files. Pure.
import { BACKUP_PHASES, RESTORE_PHASES } from "../phases/phase-names.ts";
import type { Summary, SummaryRow } from "./summary.ts";

const COLORS: Record<string, string> = {
  probe: "#94a3b8", archive: "#2563eb", transfer: "#16a34a", materialize: "#f59e0b", verify: "#9333ea", record: "#0891b2", overhead: "#e11d48",
};
const SEGMENTS = [...new Set([...BACKUP_PHASES, ...RESTORE_PHASES, "overhead"])];
const RUNS = [
  { kind: "backup", phases: [...BACKUP_PHASES, "overhead"] },
  { kind: "restore", phases: [...RESTORE_PHASES, "overhead"] },
] as const;

const esc = (s: string) => s.replace(/[<>&"]/g, (c) => ({ "<": "&lt;", ">": "&gt;", "&": "&amp;", '"': "&quot;" })[c]!);
const secs = (ms: number) => `${(ms / 1000).toFixed(2)} s`;

/** The median of each phase of one run kind, in order, leaving out phases the cell did not measure. */
function segmentsOf(row: SummaryRow, kind: "backup" | "restore", phases: readonly string[]) {
  return phases.map((p) => ({ phase: p, ms: row.phases[`${kind}.${p}`]?.median ?? 0 })).filter((s) => s.ms > 0);
}

export function summaryChartSvg(summary: Summary): string {
  const rows = summary.rows;
  const labelWidth = 430, barArea = 420, barHeight = 12, gap = 4, groupGap = 14, top = 44;
  const stackMs = (r: SummaryRow, kind: "backup" | "restore", phases: readonly string[]) => segmentsOf(r, kind, phases).reduce((a, s) => a + s.ms, 0);
  const maxMs = Math.max(1, ...rows.flatMap((r) => RUNS.flatMap((k) => [stackMs(r, k.kind, k.phases), r.phases[`${k.kind}.total`]?.max ?? 0])));
  const scale = (ms: number) => (ms / maxMs) * barArea;
  const groupHeight = RUNS.length * (barHeight + gap) + groupGap;
  const height = top + Math.max(1, rows.length) * groupHeight + 30;
  const parts: string[] = [];
  parts.push(`<text x="8" y="18" font-size="14" font-weight="bold">${esc(summary.name)} — median seconds per phase (whiskers: whole run min–max), ${summary.done}/${summary.total} runs, ${summary.failed} failed</text>`);
  SEGMENTS.forEach((p, i) => parts.push(`<rect x="${8 + i * 100}" y="28" width="10" height="10" fill="${COLORS[p]}"/><text x="${22 + i * 100}" y="37" font-size="11">${p}</text>`));
  rows.forEach((r, i) => {
    const y0 = top + i * groupHeight;
    const label = `${r.cell.dataset} · ${r.cell.backup} → ${r.cell.restore}${r.failures.length ? ` (${r.failures.length} failed)` : ""}`;
    parts.push(`<text x="8" y="${y0 + barHeight + 4}" font-size="11">${esc(label)}</text>`);
    RUNS.forEach((k, j) => {
      const y = y0 + j * (barHeight + gap);
      let x = labelWidth;
      for (const s of segmentsOf(r, k.kind, k.phases)) {
        parts.push(`<rect x="${x.toFixed(1)}" y="${y}" width="${scale(s.ms).toFixed(1)}" height="${barHeight}" fill="${COLORS[s.phase]}"><title>${k.kind} ${s.phase}: median ${secs(s.ms)}</title></rect>`);
        x += scale(s.ms);
      }
      const total = r.phases[`${k.kind}.total`];
      if (!total?.n) return;
      parts.push(`<line x1="${labelWidth + scale(total.min!)}" x2="${labelWidth + scale(total.max!)}" y1="${y + barHeight / 2}" y2="${y + barHeight / 2}" stroke="#111" stroke-width="1"/>`);
      parts.push(`<text x="${Math.max(x, labelWidth + scale(total.max!)) + 4}" y="${y + barHeight - 2}" font-size="10">${k.kind} ${secs(total.median!)}</text>`);
    });
  });
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${labelWidth + barArea + 130}" height="${height}" font-family="sans-serif">${parts.join("")}</svg>\n`;
}
