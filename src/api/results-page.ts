// /matrices/:id — the results page: the summary table and the bar chart (inline SVG, no CDN), refreshed while the
// matrix runs (the script reloads the page, whose signed link stays in the URL). Its inline style and script carry
// the response's CSP nonce (results-link.ts); nothing else may run or load.
import { summaryChartSvg } from "../matrix/chart-svg.ts";
import type { MatrixProgress } from "../matrix/matrix-records.ts";
import type { Summary } from "../matrix/summary.ts";
import { SUMMARY_HEAD, summaryCells } from "../matrix/summary-table.ts";

const esc = (s: string) => s.replace(/[<>&"']/g, (c) => ({ "<": "&lt;", ">": "&gt;", "&": "&amp;", '"': "&quot;", "'": "&#39;" })[c]!);

function table(summary: Summary): string {
  const rows = summaryCells(summary).map((cells) => `<tr>${cells.map((c) => `<td>${esc(c)}</td>`).join("")}</tr>`);
  return `<table id="summary"><thead><tr>${SUMMARY_HEAD.map((h) => `<th>${h}</th>`).join("")}</tr></thead><tbody>${rows.join("")}</tbody></table>`;
}

export function resultsPage(id: string, progress: MatrixProgress | null, summary: Summary | null, nonce: string): string {
  const running = progress?.status !== "complete";
  const status = progress ? `${progress.done} of ${progress.total} runs done, ${progress.failed} failed${progress.deadLettered.length ? `, ${progress.deadLettered.length} dead-lettered` : ""} — ${progress.status}` : "starting…";
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>snapflow · ${esc(progress?.name ?? id)}</title>
<style nonce="${nonce}">
 body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #111; }
 table { border-collapse: collapse; margin: 16px 0; } th, td { border: 1px solid #ccc; padding: 4px 8px; text-align: left; }
 th { background: #f3f4f6; } td:nth-child(n+4) { text-align: right; } #status { font-weight: 600; }
 .dead { color: #b91c1c; }
</style></head>
<body>
<h1>${esc(progress?.name ?? "matrix")} <small>${esc(id)}</small></h1>
<p id="status" data-status="${progress?.status ?? "starting"}">${esc(status)}</p>
${progress?.deadLettered.map((d) => `<p class="dead">dead-lettered: ${esc(d.reason)}</p>`).join("") ?? ""}
<div id="chart">${summary ? summaryChartSvg(summary) : ""}</div>
${summary ? table(summary) : "<p>No run has finished yet.</p>"}
<p><small>Medians of the runs that succeeded; figures from a local stack are emulator figures, not production ones.</small></p>
${running ? `<script nonce="${nonce}">
 // Reload while the matrix runs: the server renders the table and the chart.
 setTimeout(() => location.reload(), 2000);
</script>` : ""}
</body></html>`;
}
