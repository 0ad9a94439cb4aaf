// A bar chart of a summary as standalone SVG (no script, no external fonts or CDN): one group of bars per cell,
// one bar per phase, the bar's length the median and a whisker from min to max. Used by the results page and by
// the CLI's results/ files. Pure.
import type { Summary } from "./summary.ts";

const PHASES = [
  { key: "backup.total", label: "backup", color: "#2563eb" },
  { key: "restore.total", label: "restore", color: "#16a34a" },
] as const;

const esc = (s: string) => s.replace(/[<>&"]/g, (c) => ({ "<": "&lt;", ">": "&gt;", "&": "&amp;", '"': "&quot;" })[c]!);

export function summaryChartSvg(summary: Summary): string {
  const rows = summary.rows;
  const labelWidth = 430, barArea = 420, barHeight = 12, gap = 4, groupGap = 14, top = 40;
  const maxMs = Math.max(1, ...rows.flatMap((r) => PHASES.map((p) => r.phases[p.key]?.max ?? 0)));
  const scale = (ms: number) => (ms / maxMs) * barArea;
  const groupHeight = PHASES.length * (barHeight + gap) + groupGap;
  const height = top + Math.max(1, rows.length) * groupHeight + 30;
  const parts: string[] = [];
  parts.push(`<text x="8" y="18" font-size="14" font-weight="bold">${esc(summary.name)} — median seconds (whiskers: min–max), ${summary.done}/${summary.total} runs, ${summary.failed} failed</text>`);
  PHASES.forEach((p, i) => parts.push(`<rect x="${labelWidth + i * 90}" y="26" width="10" height="10" fill="${p.color}"/><text x="${labelWidth + 14 + i * 90}" y="35" font-size="11">${p.label}</text>`));
  rows.forEach((r, i) => {
    const y0 = top + i * groupHeight;
    const label = `${r.cell.dataset} · ${r.cell.backup} → ${r.cell.restore}${r.failures.length ? ` (${r.failures.length} failed)` : ""}`;
    parts.push(`<text x="8" y="${y0 + barHeight + 4}" font-size="11">${esc(label)}</text>`);
    PHASES.forEach((p, j) => {
      const st = r.phases[p.key];
      const y = y0 + j * (barHeight + gap);
      if (!st?.n) return;
      parts.push(`<rect x="${labelWidth}" y="${y}" width="${scale(st.median!).toFixed(1)}" height="${barHeight}" fill="${p.color}"><title>${p.label}: median ${(st.median! / 1000).toFixed(2)} s, min ${(st.min! / 1000).toFixed(2)} s, max ${(st.max! / 1000).toFixed(2)} s, n ${st.n}</title></rect>`);
      parts.push(`<line x1="${labelWidth + scale(st.min!)}" x2="${labelWidth + scale(st.max!)}" y1="${y + barHeight / 2}" y2="${y + barHeight / 2}" stroke="#111" stroke-width="1"/>`);
      parts.push(`<text x="${labelWidth + scale(st.max!) + 4}" y="${y + barHeight - 2}" font-size="10">${(st.median! / 1000).toFixed(2)} s</text>`);
    });
  });
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${labelWidth + barArea + 90}" height="${height}" font-family="sans-serif">${parts.join("")}</svg>\n`;
}
