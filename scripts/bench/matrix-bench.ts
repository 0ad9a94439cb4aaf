// `snapflow bench`: start a matrix, follow it with a progress bar, print its summary and write
// results/<name>.{json,md,svg} with a description of the machine it ran on (the run it replaces goes to
// results/archive/: results-files.ts).
import { readFileSync, writeFileSync } from "node:fs";
import { cpus, release, totalmem } from "node:os";
import { join } from "node:path";
import { summaryChartSvg } from "../../src/matrix/chart-svg.ts";
import { MATRIX_PRESETS } from "../../src/matrix/presets.ts";
import { seedComparison, seedComparisonMarkdown, seedPresetsNotMeasured } from "../../src/matrix/seed-comparison.ts";
import { summaryMarkdown, type Summary } from "../../src/matrix/summary.ts";
import type { apiClient } from "../cli/api-client.ts";
import { PROJECT } from "../stack/stack.ts";
import { currentResultsStem } from "./results-files.ts";

interface BenchOptions {
  preset?: string;
  spec?: string;
  name?: string;
  runs?: string;
  out?: string;
  url: string;
}

interface MatrixView {
  progress: { total: number; done: number; failed: number; status: string; deadLettered: { reason: string }[] } | null;
  summary: Summary | null;
}

function bar(done: number, total: number, width = 30): string {
  const filled = total ? Math.round((done / total) * width) : width;
  return `[${"#".repeat(filled)}${".".repeat(width - filled)}]`;
}

export function machineDescription(url: string): string {
  const local = /^https?:\/\/(127\.|localhost|\[::1\])/.test(url);
  return `${local ? "local stack (wrangler dev, host agent, SeaweedFS standing in for R2 — emulator figures, not production)" : `API ${url}`}; ` +
    `${cpus().length} × ${cpus()[0]?.model.trim() ?? "cpu"}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, Linux ${release()}, node ${process.version}`;
}

export async function runBench(api: ReturnType<typeof apiClient>, o: BenchOptions, usage: (m: string) => never): Promise<number> {
  if (o.preset && o.spec) usage("give --preset or --spec, not both");
  const base = o.spec ? JSON.parse(readFileSync(o.spec, "utf8")) : MATRIX_PRESETS[o.preset ?? "smoke"] ?? usage(`no preset '${o.preset}' (one of ${Object.keys(MATRIX_PRESETS).join(", ")})`);
  const spec = { ...base, ...(o.name ? { name: o.name } : {}), ...(o.runs ? { runs: Number(o.runs) } : {}) };
  const started = await api.call<{ id: string; cells: number; runs: number }>("POST", "/api/matrices", spec);
  console.error(`matrix ${started.id}: ${started.cells} cells, ${started.runs} runs`);
  // A signed, read-only link that expires: shareable, unlike the API token.
  const link = await api.call<{ url: string; expiresAt: string }>("POST", `/api/matrices/${started.id}/link`, {});
  console.error(`results page: ${link.url} (read-only, until ${link.expiresAt})`);
  const tty = process.stderr.isTTY;
  let last = "";
  let view: MatrixView;
  for (;;) {
    view = await api.call<MatrixView>("GET", `/api/matrices/${started.id}`);
    const p = view.progress;
    const line = p ? `${bar(p.done, p.total)} ${p.done}/${p.total} runs, ${p.failed} failed${p.deadLettered.length ? `, ${p.deadLettered.length} dead-lettered` : ""}` : "waiting…";
    if (line !== last) process.stderr.write(tty ? `\r${line}` : `${line}\n`);
    last = line;
    if (p?.status === "complete" && view.summary) break;
    await new Promise((r) => setTimeout(r, 1000));
  }
  if (tty) process.stderr.write("\n");
  writeResults(view.summary!, spec, o.url, o.out);
  return view.summary!.failed || view.progress!.deadLettered.length ? 1 : 0;
}

/** `snapflow report ID`: rebuild a matrix's summary from its stored runs and write its results files again. */
export async function runReport(api: ReturnType<typeof apiClient>, id: string, o: { url: string; out?: string }): Promise<number> {
  const summary = await api.call<Summary>("POST", `/api/matrices/${id}/summary`);
  const { spec } = await api.call<{ spec: unknown }>("GET", `/api/matrices/${id}`);
  writeResults(summary, spec, o.url, o.out);
  return summary.failed ? 1 : 0;
}

/** `snapflow report --from FILE.json`: rewrite a results file's .md and .svg from its .json (no API needed). */
export function reportFromFile(file: string, out?: string): number {
  const saved = JSON.parse(readFileSync(file, "utf8")) as { machine: string; spec: unknown; summary: Summary };
  writeResults(saved.summary, saved.spec, "", out, saved.machine);
  return saved.summary.failed ? 1 : 0;
}

function writeResults(summary: Summary, spec: unknown, url: string, out?: string, machineText?: string): void {
  const machine = machineText ?? machineDescription(url);
  const rows = seedComparison(summary);
  // A matrix that measured no seed preset says nothing about the seeds (no page of "not measured").
  const seeds = rows.length === 0 ? "" : "\n## Beside the seeds' published figures\n\n" +
    "Ours: the median of what the seeds timed — backup: archive + transfer (without snapflow's source manifest and " +
    "verify); restore: transfer + extract or mount (without verify) — and of the whole phase, on this machine " +
    "(a local stack gives emulator figures). Theirs: as published, on their machines.\n\n" + seedComparisonMarkdown(rows) +
    `\nSeed presets not measured here:\n\n${seedPresetsNotMeasured(summary).map((m) => `- \`${m.preset}\`: ${m.reason}`).join("\n")}\n`;
  const md = `${summaryMarkdown(summary)}\nMachine: ${machine}\n${seeds}`;
  console.log(md);
  const stem = currentResultsStem(out ?? join(PROJECT, "results"), summary.name);
  writeFileSync(`${stem}.json`, JSON.stringify({ machine, spec, summary }, null, 1));
  writeFileSync(`${stem}.md`, md);
  writeFileSync(`${stem}.svg`, summaryChartSvg(summary));
  console.error(`wrote ${stem}.{json,md,svg}`);
}
