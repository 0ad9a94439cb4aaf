// The peers race's results files: results/<date>-<name>.{json,md,svg}. The JSON keeps every sample (wall ms,
// snapflow's steps, run ids, CPU-seconds per part as measured, the polls' estimate); the Markdown gives per dataset
// every row's median, min, max and n, each part's median CPU-seconds less the race's polls, and where the median
// run's time went, then the ratios the issues' targets name, met or missed. Markdown rendering is pure.
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { peersChartSvg, segments } from "./chart.ts";
import { cpuStats, medianSample, ratios, rowStats, type CpuPart, type PeersResults, type PeerRow } from "./model.ts";
import { currentResultsStem } from "../results-files.ts";
import { median } from "../../../src/matrix/median.ts";

/** A Markdown table cell: a pipe inside it would end the cell. */
const cell = (text: string) => text.replace(/\|/g, "\\|");
const s = (ms: number | undefined) => (ms === undefined ? "—" : (ms / 1000).toFixed(2));

type CpuColumn = CpuPart | "total" | "polls";
const CPU_COLUMNS: CpuColumn[] = ["agent", "engine", "worker", "polls", "wrangler", "store", "commands", "total"];
const CPU_HEADINGS: Record<CpuColumn, string> = { agent: "agent", engine: "engine", worker: "Worker", polls: "polls (Worker, est.)", wrangler: "wrangler", store: "store", commands: "commands", total: "total CPU-s" };
const cpuCell = (row: PeerRow, part: CpuColumn) => {
  const m = cpuStats(row, part).median;
  return m === undefined ? "—" : m.toFixed(2);
};

function breakdown(row: PeerRow): string {
  const m = medianSample(row);
  if (!m?.steps) return "";
  const parts = segments(row).map(([name, ms]) => {
    const nested = Object.entries(m.substeps ?? {}).filter(([k]) => k.startsWith(`${name}.`)).map(([k, v]) => `${k.slice(name.length + 1)} ${s(v)}`);
    return `${name} ${s(ms)}${nested.length ? ` (${nested.join(", ")})` : ""}`;
  });
  return parts.join(" · ");
}

export function peersMarkdown(r: PeersResults, svgName: string): string {
  const out: string[] = [
    `# ${r.name} (${r.date}): snapflow against the floors and restic`,
    "",
    `${r.runs} run${r.runs === 1 ? "" : "s"} of each operation on one tree per dataset; seconds: median (min–max) and n. ` +
      "snapflow: wall time from the POST to the run's recorded end (its final progress write, on the same clock: this stack runs on one " +
      "machine), through the HTTP API of a private local stack; the race polls its status every 100 ms (for its CPU accounting), and the " +
      "first poll that saw it complete, up to 100 ms later, is the \"seen\" column. The floors (through rclone) and restic (its s3 backend) use that stack's own SeaweedFS and read the same " +
      "directory the sandbox's /workspace is. Restores go into a fresh directory; the floor's and restic's include `sync` " +
      "(snapflow's default restore does not; the JSON keeps the `sync` that followed it, as syncAfterMs). MB: apparent size (du -sb), and the space used on disk.",
    "",
    "CPU-seconds over the same span, per process (utime + stime from /proc, with what each reaped; docs/benchmarks.md): " +
      "agent = the host agent's own process; engine = what it runs below it (tar, zstd, mksquashfs, snapflow-lazy); " +
      "Worker = workerd, less what the race's own status polls cost it (\"polls\": their number × the CPU per poll measured on the " +
      "completed run just after; an estimate); wrangler = wrangler dev's own Node process, likewise less the polls (no production " +
      "counterpart: not in the total); store = SeaweedFS; commands = what the race ran itself (the floors' pipelines, restic, sync). " +
      "Each column is its own median over the runs; the JSON keeps each run's figures as measured.",
    "",
    `The 10 MB change: ${r.change.description}`,
    "",
  ];
  for (const d of r.datasets) {
    out.push(`## ${d.name}: ${(d.bytes / 1e6).toFixed(0)} MB${d.diskBytes ? ` (${(d.diskBytes / 1e6).toFixed(0)} MB on disk)` : ""}, ${d.entries} entries`, "", d.description, "");
    out.push(`| operation | n | median s | min s | max s | seen, median s | ${CPU_COLUMNS.map((c) => CPU_HEADINGS[c]).join(" | ")} | where the median run's time went (s) |`, `| --- | --: | --: | --: | --: | --: | ${CPU_COLUMNS.map(() => "--:").join(" | ")} | --- |`);
    for (const row of d.rows) {
      const st = rowStats(row);
      const seen = median(row.samples.flatMap((x) => (typeof x.detail?.polledMs === "number" ? [x.detail.polledMs] : [])));
      out.push(`| ${cell(row.label)} | ${st.n} | ${s(st.median)} | ${s(st.min)} | ${s(st.max)} | ${seen === undefined ? "" : s(seen)} | ${CPU_COLUMNS.map((c) => cpuCell(row, c)).join(" | ")} | ${breakdown(row)} |`);
    }
    out.push("", "The median run is the lower middle one when n is even; \"overhead\" is its wall time that no step accounts for " +
      "(the API, scheduling between steps). Ratios of medians (the recorded ends), against the issue's targets:", "", "| ratio | value | target | |", "| --- | --: | --: | --- |");
    for (const q of ratios(d)) {
      const unit = q.over ? "×" : q.figure === "worker-cpu-per-gb" ? " CPU-s/GB" : q.figure === "cpu" ? " CPU-s" : q.figure === "stored-mb" ? " MB" : " s";
      const value = q.value === undefined ? `— (${q.missing})` : `${q.value.toFixed(2)}${unit}`;
      out.push(`| ${q.name} | ${value} | ${q.target === undefined ? "" : `≤ ${q.target}${unit}`} | ${q.met === undefined ? "" : q.met ? "met" : "**missed**"} |`);
    }
    if (d.errors.length) out.push("", "Failed operations (not in the figures):", "", ...d.errors.map((e) => `- ${e.split("\n")[0]}`));
    out.push("");
  }
  const commands = new Map(r.datasets.flatMap((d) => d.rows.map((row) => [row.label, row.command] as const)));
  out.push(`![where the time goes](${svgName})`, "", "## Commands", "", ...[...commands].map(([label, cmd]) => `- ${label}: \`${cmd}\``), "");
  out.push(`Machine: ${r.machine}`, "");
  return out.join("\n");
}

/** `rewriteAs`: the run's own files again, under that name (report --from); else a new run, the current one archived first. */
export function writePeersResults(r: PeersResults, dir: string, o: { rewriteAs?: string } = {}): string {
  mkdirSync(dir, { recursive: true });
  const stem = o.rewriteAs ?? basename(currentResultsStem(dir, r.name));
  writeFileSync(join(dir, `${stem}.json`), JSON.stringify(r, null, 1));
  writeFileSync(join(dir, `${stem}.md`), peersMarkdown(r, `${stem}.svg`));
  writeFileSync(join(dir, `${stem}.svg`), peersChartSvg(r));
  return join(dir, stem);
}

/** `snapflow report --from FILE.json` for a peers race: rewrites its .md and .svg; undefined when FILE is not one. */
export function rewritePeersResults(file: string, out?: string): number | undefined {
  const saved = JSON.parse(readFileSync(file, "utf8")) as PeersResults | { summary: unknown };
  if (!("datasets" in saved)) return undefined;
  console.error(`wrote ${writePeersResults(saved, out ?? dirname(file), { rewriteAs: basename(file, ".json") })}.{json,md,svg}`);
  return saved.datasets.some((d) => d.errors.length) ? 1 : 0;
}
