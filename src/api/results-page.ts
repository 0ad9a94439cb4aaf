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
  // The table scrolls in its own box on a narrow screen; the page itself never gets wider than the screen.
  return `<div class="scroll"><table id="summary"><thead><tr>${SUMMARY_HEAD.map((h) => `<th>${h}</th>`).join("")}</tr></thead><tbody>${rows.join("")}</tbody></table></div>`;
}

export function resultsPage(id: string, progress: MatrixProgress | null, summary: Summary | null, nonce: string): string {
  const running = progress?.status !== "complete";
  const status = progress ? `${progress.done} of ${progress.total} runs done, ${progress.failed} failed${progress.deadLettered.length ? `, ${progress.deadLettered.length} dead-lettered` : ""} — ${progress.status}` : "starting…";
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>snapflow · ${esc(progress?.name ?? id)}</title>
<style nonce="${nonce}">
 body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #111; overflow-wrap: anywhere; }
 h1 { font-size: 1.5em; }
 table { border-collapse: collapse; margin: 16px 0; } th, td { border: 1px solid #ccc; padding: 4px 8px; text-align: left; overflow-wrap: normal; }
 th { background: #f3f4f6; } td:nth-child(n+4) { text-align: right; } td:nth-child(n+4):not(:last-child) { white-space: nowrap; } #status { font-weight: 600; }
 .scroll { overflow-x: auto; max-width: 100%; }
 #chart svg { display: block; width: 100%; max-width: 720px; height: auto; }
 .dead { color: #b91c1c; }
 @media (max-width: 600px) { body { margin: 12px; } h1 { font-size: 1.2em; } th, td { padding: 3px 5px; } }
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
