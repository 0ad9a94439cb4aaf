// The peers race as standalone SVG (no script, no external fonts): per dataset, one horizontal bar per operation,
// the median run's wall time stacked by where it went — snapflow's steps and what its steps do not account for
// ("overhead": the API, scheduling between steps, polling), a single segment for the floors and restic — and a
// whisker from min to max. The matrix chart (src/matrix/chart-svg.ts) draws unstacked totals per cell; this one
// exists for the breakdown. Pure.
import { medianSample, rowStats, type PeersResults, type PeerRow } from "./model.ts";

const COLORS: Record<string, string> = {
  floor: "#6b7280", restic: "#ea580c", probe: "#a855f7", archive: "#2563eb", transfer: "#0891b2", materialize: "#16a34a",
  verify: "#ca8a04", record: "#db2777", cleanup: "#78716c", overhead: "#d1d5db",
};
const color = (k: string) => COLORS[k] ?? "#64748b";
const esc = (s: string) => s.replace(/[<>&"]/g, (c) => ({ "<": "&lt;", ">": "&gt;", "&": "&amp;", '"': "&quot;" })[c]!);

/** The median run's segments: [name, ms] adding up to its wall time. */
export function segments(row: PeerRow): [string, number][] {
  const s = medianSample(row);
  if (!s) return [];
  if (!s.steps) return [[row.who, s.ms]];
  const steps = Object.entries(s.steps);
  const accounted = steps.reduce((t, [, ms]) => t + ms, 0);
  return [...steps, ["overhead", Math.max(0, s.ms - accounted)]];
}

export function peersChartSvg(r: PeersResults): string {
  const labelWidth = 380, barArea = 470, barHeight = 14, gap = 6, top = 46;
  // One scale per dataset: a small tree's bars would be slivers on a large tree's scale.
  const rows = r.datasets.flatMap((d) => {
    const maxMs = Math.max(1, ...d.rows.map((x) => rowStats(x).max ?? 0));
    return [{ heading: `${d.name} — ${(d.bytes / 1e6).toFixed(0)} MB, ${d.entries} entries (bars to this dataset's scale)` }, ...d.rows.map((row) => ({ row, maxMs }))];
  });
  const parts: string[] = [`<text x="8" y="18" font-size="14" font-weight="bold">${esc(r.name)} ${r.date} — median run, stacked by step (whiskers: min–max of ${r.runs} run${r.runs === 1 ? "" : "s"})</text>`];
  const legend = Object.keys(COLORS);
  legend.forEach((k, i) => parts.push(`<rect x="${8 + i * 82}" y="26" width="10" height="10" fill="${color(k)}"/><text x="${22 + i * 82}" y="35" font-size="11">${k}</text>`));
  let y = top;
  for (const item of rows) {
    if ("heading" in item) {
      y += 6;
      parts.push(`<text x="8" y="${y + 11}" font-size="12" font-weight="bold">${esc(item.heading)}</text>`);
      y += barHeight + gap;
      continue;
    }
    const { row, maxMs } = item;
    const scale = (ms: number) => (ms / maxMs) * barArea;
    const st = rowStats(row);
    parts.push(`<text x="8" y="${y + barHeight - 3}" font-size="11">${esc(row.label)}</text>`);
    let x = labelWidth;
    for (const [name, ms] of segments(row)) {
      const w = scale(ms);
      parts.push(`<rect x="${x.toFixed(1)}" y="${y}" width="${w.toFixed(1)}" height="${barHeight}" fill="${color(name)}"><title>${esc(`${row.label}: ${name} ${(ms / 1000).toFixed(2)} s`)}</title></rect>`);
      x += w;
    }
    if (st.n) {
      parts.push(`<line x1="${labelWidth + scale(st.min!)}" x2="${labelWidth + scale(st.max!)}" y1="${y + barHeight / 2}" y2="${y + barHeight / 2}" stroke="#111" stroke-width="1"/>`);
      parts.push(`<text x="${labelWidth + scale(st.max!) + 4}" y="${y + barHeight - 3}" font-size="10">${(st.median! / 1000).toFixed(2)} s</text>`);
    } else {
      parts.push(`<text x="${labelWidth + 4}" y="${y + barHeight - 3}" font-size="10">not measured</text>`);
    }
    y += barHeight + gap;
  }
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${labelWidth + barArea + 70}" height="${y + 16}" font-family="sans-serif">${parts.join("")}</svg>\n`;
}
