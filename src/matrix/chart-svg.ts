// The summary as standalone SVG (no script, no external fonts or CDN): per cell, one stacked bar for the backup and
// one for the restore, each segment the median of one phase (probe, archive, transfer, …, and the overhead no phase
// measured as work: step scheduling, retries, to the wall clock's median), drawn to scale on a seconds axis with gridlines. The whisker across
// a bar spans the min–max of the run's wall clock (first step to last), and the line above it gives that clock's
// median: the same clock as the bar, so label, bar and axis agree. 480 units wide, labels above the bars, so that
// scaled to a phone's width (the results page sets max-width: 100%) it stays readable. Used by the results page
// and the CLI's results/ files. Pure.
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

/**
 * The median of each phase of one run kind, in order, leaving out phases the cell did not measure. The overhead is
 * what the wall clock's median leaves after the phases' medians (medians do not add up, so the overhead's own
 * median would end the bar short of, or past, the wall clock it is labelled with); its own median where no wall
 * clock was kept.
 */
function segmentsOf(row: SummaryRow, kind: "backup" | "restore", phases: readonly string[]) {
  const work = phases.filter((p) => p !== "overhead").map((p) => ({ phase: p, ms: row.phases[`${kind}.${p}`]?.median ?? 0 }));
  const wall = row.phases[`${kind}.wall`]?.median;
  const overhead = wall !== undefined ? Math.max(0, wall - work.reduce((a, s) => a + s.ms, 0)) : (row.phases[`${kind}.overhead`]?.median ?? 0);
  return [...work, { phase: "overhead", ms: overhead }].filter((s) => s.ms > 0);
}

/** Tick spacing in seconds: 1, 2 or 5 × a power of ten, about five ticks across `maxS`. */
export function tickStep(maxS: number): number {
  const raw = maxS / 5;
  const pow = 10 ** Math.floor(Math.log10(raw));
  return [1, 2, 5, 10].map((m) => m * pow).find((s) => s >= raw)!;
}

export function summaryChartSvg(summary: Summary): string {
  const rows = summary.rows;
  const width = 480, left = 8, barArea = width - 2 * left, barHeight = 10, labelRow = 13, runGap = 4, header = 16, groupGap = 10, top = 78;
  const stackMs = (r: SummaryRow, kind: "backup" | "restore", phases: readonly string[]) => segmentsOf(r, kind, phases).reduce((a, s) => a + s.ms, 0);
  // The wall clock's stats, or (a summary from before it was kept) the steps' own total.
  const clock = (r: SummaryRow, kind: string) => (r.phases[`${kind}.wall`]?.n ? r.phases[`${kind}.wall`] : r.phases[`${kind}.total`]);
  const dataMax = Math.max(1, ...rows.flatMap((r) => RUNS.flatMap((k) => [stackMs(r, k.kind, k.phases), clock(r, k.kind)?.max ?? 0])));
  const step = tickStep(dataMax / 1000);
  const axisMaxMs = Math.ceil(dataMax / 1000 / step - 1e-9) * step * 1000;
  const x = (ms: number) => left + (ms / axisMaxMs) * barArea;
  const runHeight = labelRow + barHeight + runGap;
  const groupHeight = header + RUNS.length * runHeight + groupGap;
  const axisY = top + Math.max(1, rows.length) * groupHeight;
  const height = axisY + 34;
  const parts: string[] = [];
  parts.push(`<text x="${left}" y="16" font-size="13" font-weight="bold">${esc(summary.name)} — ${summary.done}/${summary.total} runs, ${summary.failed} failed</text>`);
  parts.push(`<text x="${left}" y="32" font-size="11">median seconds per phase and overhead: the wall clock; whiskers: its min–max</text>`);
  SEGMENTS.forEach((p, i) => {
    const lx = left + (i % 4) * 116, ly = 42 + Math.floor(i / 4) * 16;
    parts.push(`<rect x="${lx}" y="${ly}" width="10" height="10" fill="${COLORS[p]}"/><text x="${lx + 14}" y="${ly + 9}" font-size="12">${p}</text>`);
  });
  // The axis first, so the bars are drawn over its gridlines.
  for (let t = 0; t * step * 1000 <= axisMaxMs + 1e-6; t++) {
    const s = Number((t * step).toFixed(6));
    const tx = x(s * 1000);
    parts.push(`<line x1="${tx.toFixed(1)}" x2="${tx.toFixed(1)}" y1="${top - 4}" y2="${axisY}" stroke="#e5e7eb" stroke-width="1"/>`);
    parts.push(`<text class="tick" x="${tx.toFixed(1)}" y="${axisY + 13}" font-size="11" text-anchor="${t === 0 ? "start" : tx > width - 20 ? "end" : "middle"}">${s} s</text>`);
  }
  parts.push(`<line x1="${left}" x2="${left + barArea}" y1="${axisY}" y2="${axisY}" stroke="#111" stroke-width="1"/>`);
  parts.push(`<text class="axis-title" x="${left + barArea / 2}" y="${axisY + 28}" font-size="12" text-anchor="middle">seconds (wall clock)</text>`);
  rows.forEach((r, i) => {
    const y0 = top + i * groupHeight;
    parts.push(`<text x="${left}" y="${y0 + 11}" font-size="12" font-weight="bold">${esc(r.cell.dataset)}${r.failures.length ? ` (${r.failures.length} failed)` : ""}</text>`);
    RUNS.forEach((k, j) => {
      const y = y0 + header + j * runHeight + labelRow;
      const c = clock(r, k.kind);
      const strategy = k.kind === "backup" ? r.cell.backup : r.cell.restore;
      parts.push(`<text class="value" x="${left}" y="${y - 3}" font-size="12">${k.kind} ${esc(strategy)}${c?.n ? ` · ${secs(c.median!)}` : ""}</text>`);
      let bx = left;
      for (const s of segmentsOf(r, k.kind, k.phases)) {
        const w = x(s.ms) - left;
        parts.push(`<rect x="${bx.toFixed(1)}" y="${y}" width="${w.toFixed(1)}" height="${barHeight}" fill="${COLORS[s.phase]}"><title>${k.kind} ${s.phase}: ${s.phase === "overhead" ? "the rest of the wall clock's median" : "median"} ${secs(s.ms)}</title></rect>`);
        bx += w;
      }
      if (!c?.n) return;
      parts.push(`<line x1="${x(c.min!).toFixed(1)}" x2="${x(c.max!).toFixed(1)}" y1="${y + barHeight / 2}" y2="${y + barHeight / 2}" stroke="#111" stroke-width="1"/>`);
    });
  });
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif">${parts.join("")}</svg>\n`;
}
