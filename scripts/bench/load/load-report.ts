// Writes results/<date>-load.{json,md}: the machine, the shape of the load, every run's outcome and time, the
// resource samples, and the verdicts with their criteria (load-verdicts.ts).
import { writeFileSync } from "node:fs";
import type { LoadShape, MatrixOutcome, RunOutcome } from "./load-work.ts";
import { FD_SLACK, median, RSS_RATIO, RSS_SLACK, workerdOwnFds, type Verdicts } from "./load-verdicts.ts";
import type { ResourceSample } from "./resources.ts";
import { currentResultsStem } from "../results-files.ts";

export interface LoadResults {
  machine: string;
  startedAt: string;
  shape: LoadShape;
  durations: { prepareMs: number; burstMs: number; matrixMs: number; settleMs: number; totalMs: number };
  firsts: RunOutcome[];
  burst: RunOutcome[];
  matrix: MatrixOutcome | null;
  readings: { before: ResourceSample; after: ResourceSample };
  samples: ResourceSample[];
  verdicts: Verdicts;
}

const MiB = (b: number) => `${(b / 2 ** 20).toFixed(0)} MiB`;
const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

type Reading = (s: ResourceSample) => number;

function during(samples: ResourceSample[], read: Reading): { median: number; peak: number } {
  const xs = samples.map(read);
  return { median: median(xs), peak: Math.max(0, ...xs) };
}

export function loadMarkdown(r: LoadResults): string {
  const load = r.samples.filter((x) => x.phase === "backups+restores" || x.phase === "matrix");
  const row = (label: string, read: Reading, fmt: (n: number) => string) => {
    const d = during(load, read);
    return `| ${label} | ${fmt(read(r.readings.before))} | ${fmt(d.median)} | ${fmt(d.peak)} | ${fmt(read(r.readings.after))} |`;
  };
  const m = r.samples.filter((x) => x.phase === "matrix");
  const [m0, m1] = [m[0], m[m.length - 1]];
  const perInstance = m0 && m1 && m1.workflowInstancesOpen > m0.workflowInstancesOpen
    ? (m1.workerdRss - m0.workerdRss) / (m1.workflowInstancesOpen - m0.workflowInstancesOpen) : undefined;
  const count = (n: number) => String(Math.round(n));
  const v = r.verdicts;
  const byKind = (kind: string) => r.burst.filter((o) => o.kind === kind);
  const times = (os: RunOutcome[]) => `${os.filter((o) => o.status === "complete").length}/${os.length} complete, median ${s(median(os.map((o) => o.ms)))}, max ${s(Math.max(0, ...os.map((o) => o.ms)))}`;
  return [
    `# Load run (${r.startedAt})`,
    "",
    `Verdict: **${v.ok ? "pass" : "FAIL"}** — ${v.failures.length} failures; RSS flat: workerd ${v.rss.workerd.ok ? "yes" : "NO"}, agent ${v.rss.agent.ok ? "yes" : "NO"}; descriptors back: ${v.fdsBack ? "yes" : "NO"}; mounts back: ${v.mountsBack ? "yes" : "NO"}.`,
    "",
    `1. ${r.shape.parallel} source sandboxes, each a ${r.shape.dataset.kind} tree of ${r.shape.dataset.files} files / ${(r.shape.dataset.bytes / 1e6).toFixed(0)} MB, and a first snapshot of each (${s(r.durations.prepareMs)}; ${times(r.firsts)}).`,
    `2. At once: ${r.shape.parallel} backups of the sources and ${r.shape.parallel} restores of the first snapshots into fresh sandboxes, half tar extracts and half squashfuse mounts (${s(r.durations.burstMs)}). Backups: ${times(byKind("backup"))}. Restores: ${times(byKind("restore"))}.`,
    `3. Matrix ${r.matrix?.id ?? "(none)"}: ${r.matrix ? `${r.matrix.progress.done}/${r.matrix.progress.total} runs, ${r.matrix.progress.failed} failed, ${r.matrix.progress.deadLettered.length} dead-lettered, ${s(r.durations.matrixMs)}` : "did not run"} (5 cells × 20 runs of a 200-file tree, concurrency 2, a fresh sandbox per run).`,
    `4. The load's sandboxes ended, then up to a minute for descriptors to settle (${s(r.durations.settleMs)}).`,
    "",
    "| | before | during (median) | during (peak) | after |",
    "| --- | --: | --: | --: | --: |",
    row("workerd RSS", (x) => x.workerdRss, MiB),
    row("agent RSS", (x) => x.agentRss, MiB),
    row("workerd open fds, all", (x) => x.workerdFds, count),
    row("… of them Workflow instance databases (3 each)", (x) => x.workerdWorkflowDbFds, count),
    row("… the rest (judged)", workerdOwnFds, count),
    row("Workflow instances workerd holds open", (x) => x.workflowInstancesOpen, count),
    row("agent open fds", (x) => x.agentFds, count),
    row("mounts under the project", (x) => x.mounts, count),
    "",
    "The local Workflows engine makes each Workflow instance a Durable Object with its own SQLite database and keeps it open " +
      "for the life of workerd (it does not evict them), so its descriptors grow by three per run; they are shown apart and the rest is judged." +
      (perInstance === undefined ? "" : ` Over the matrix, workerd's RSS grew ${MiB(m1!.workerdRss - m0!.workerdRss)} while it came to hold ` +
        `${m1!.workflowInstancesOpen - m0!.workflowInstancesOpen} more instances: ${(perInstance / 2 ** 20).toFixed(2)} MiB per instance. ` +
        "This run does not separate the engine's share from ours; a control (the same number of empty Workflow instances) would."),
    "",
    `RSS over the matrix (${r.samples.filter((x) => x.phase === "matrix").length} samples, 1 s apart), median of the first half → second half: ` +
      `workerd ${MiB(v.rss.workerd.firstMedian)} → ${MiB(v.rss.workerd.secondMedian)}, agent ${MiB(v.rss.agent.firstMedian)} → ${MiB(v.rss.agent.secondMedian)}.`,
    "",
    `Criteria: no failed or dead-lettered run; RSS flat = the second half's median at most ${Math.round((RSS_RATIO - 1) * 100)} % + ${MiB(RSS_SLACK)} above the first half's (the matrix repeats the same small runs, so a leak would grow with them); ` +
      `descriptors back = after ≤ before + ${FD_SLACK.workerd} (workerd: pooled keep-alive connections) and + ${FD_SLACK.agent} (agent); mounts back = after = before.`,
    "",
    ...(v.failures.length ? ["Failures:", "", ...v.failures.map((f) => `- ${f}`), ""] : []),
    `Machine: ${r.machine}`,
    "",
  ].join("\n");
}

export function writeLoadResults(r: LoadResults, dir: string): string {
  const stem = currentResultsStem(dir, "load");
  writeFileSync(`${stem}.json`, JSON.stringify(r, null, 1));
  writeFileSync(`${stem}.md`, loadMarkdown(r));
  return stem;
}
