// /matrices/:id — the results page: the summary table and the bar chart (inline SVG, no CDN), refreshed while the
// matrix runs. A browser cannot send a bearer header on navigation, so the page takes the token as ?token= and its
// script sends it back as a header when it polls the API.
import { summaryChartSvg } from "../matrix/chart-svg.ts";
import type { MatrixProgress } from "../matrix/matrix-records.ts";
import type { Summary } from "../matrix/summary.ts";

const esc = (s: string) => s.replace(/[<>&"']/g, (c) => ({ "<": "&lt;", ">": "&gt;", "&": "&amp;", '"': "&quot;", "'": "&#39;" })[c]!);
const secs = (ms: number | undefined) => (ms === undefined ? "—" : (ms / 1000).toFixed(2));

function table(summary: Summary): string {
  const head = ["dataset", "backup", "restore", "n", "archive MB", "backup s (min–max)", "backup MB/s", "restore s (min–max)", "restore MB/s", "sandbox start s", "failures"];
  const rows = summary.rows.map((r) => {
    const range = (k: string) => {
      const p = r.phases[k];
      return p?.n ? `${secs(p.median)} (${secs(p.min)}–${secs(p.max)})` : "—";
    };
    const cells = [r.cell.dataset, r.cell.backup, r.cell.restore, String(r.n), r.archiveBytes ? (r.archiveBytes / 1e6).toFixed(1) : "—", range("backup.total"), String(r.backupMBps ?? "—"), range("restore.total"), String(r.restoreMBps ?? "—"), range("sandbox.start"), r.failures.map((f) => `run ${f.run}: ${f.error}`).join("; ")];
    return `<tr>${cells.map((c) => `<td>${esc(c)}</td>`).join("")}</tr>`;
  });
  return `<table id="summary"><thead><tr>${head.map((h) => `<th>${h}</th>`).join("")}</tr></thead><tbody>${rows.join("")}</tbody></table>`;
}

export function resultsPage(id: string, progress: MatrixProgress | null, summary: Summary | null): string {
  const running = progress?.status !== "complete";
  const status = progress ? `${progress.done} of ${progress.total} runs done, ${progress.failed} failed${progress.deadLettered.length ? `, ${progress.deadLettered.length} dead-lettered` : ""} — ${progress.status}` : "starting…";
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>snapflow · ${esc(progress?.name ?? id)}</title>
<style>
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
${running ? `<script>
 // Reload while the matrix runs: the server renders the table and the chart.
 setTimeout(() => location.reload(), 2000);
</script>` : ""}
</body></html>`;
}
