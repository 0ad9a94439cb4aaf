// The aggregate of a matrix: per cell (dataset × backup × restore) and phase, the median, min and max of the runs'
// measured milliseconds, n, bytes and MB/s, and the failures with their errors. Built from the stored run results
// every time, so a redelivered result message can never count twice. Pure.
import { wallAndOverhead } from "../phases/phase-runner.ts";
import type { Cell } from "./matrix-spec.ts";
import { median, stats } from "./median.ts";
import { BREAKDOWN_HEAD, breakdownCells, SUMMARY_HEAD, summaryCells } from "./summary-table.ts";

export type { RunResult, Summary, SummaryRow } from "./summary-types.ts";
import type { RunResult, Summary, SummaryRow } from "./summary-types.ts";
import { swappedInByTransfer } from "../restore/usable-step.ts";

/**
 * The part of a backup the seeds timed: making the archive and moving it (archive step less its source manifest,
 * plus transfer). snapflow's manifest, verify and record steps are extra work the seeds did not do.
 */
export function backupCoreMs(r: RunResult): number | undefined {
  const s = r.backup?.steps;
  if (!s?.archive || !s.transfer) return undefined;
  const manifestMs = (s.archive.manifest as { ms?: number } | undefined)?.ms ?? 0;
  return Math.max(0, s.archive.ms - manifestMs) + s.transfer.ms;
}

/** The part of a restore the seeds timed: getting the archive into the sandbox and extracting or mounting it. */
export function restoreCoreMs(r: RunResult): number | undefined {
  const s = r.restore?.steps;
  // (No materialize step when the transfer swapped the tree in: a lazy mount, a trusted image.)
  return s?.transfer && (s.materialize || swappedInByTransfer(s)) ? s.transfer.ms + (s.materialize?.ms ?? 0) : undefined;
}

const mbps = (bytes: number | undefined, ms: number | undefined) => (bytes && ms ? Math.round((bytes / 1e6 / (ms / 1000)) * 10) / 10 : undefined);

export function buildSummary(matrixId: string, name: string, cells: Cell[], runsPerCell: number, results: RunResult[]): Summary {
  const rows = cells.map((cell): SummaryRow => {
    const mine = results.filter((r) => r.cell.index === cell.index);
    const ok = mine.filter((r) => r.ok);
    const phases: Record<string, number[]> = {};
    const add = (key: string, ms: number | undefined) => {
      if (ms !== undefined) (phases[key] ??= []).push(ms);
    };
    for (const r of ok) {
      add("sandbox.start", r.sandboxStartMs);
      add("backup.total", r.backup?.totalMs);
      add("restore.total", r.restore?.totalMs);
      for (const [k, v] of Object.entries(r.backup?.steps ?? {})) add(`backup.${k}`, v.ms);
      for (const [k, v] of Object.entries(r.restore?.steps ?? {})) add(`restore.${k}`, v.ms);
      add("backup.overhead", r.backup ? wallAndOverhead(r.backup.steps).overheadMs : undefined);
      add("restore.overhead", r.restore ? wallAndOverhead(r.restore.steps).overheadMs : undefined);
      // What a user waited for, first step to last: the chart's bars, whiskers and labels are on this clock.
      add("backup.wall", r.backup ? wallAndOverhead(r.backup.steps).wallMs : undefined);
      add("restore.wall", r.restore ? wallAndOverhead(r.restore.steps).wallMs : undefined);
      add("backup.core", backupCoreMs(r));
      add("restore.core", restoreCoreMs(r));
    }
    const archiveBytes = median(ok.map((r) => r.backup?.archiveBytes ?? 0));
    const phaseStats = Object.fromEntries(Object.entries(phases).map(([k, v]) => [k, stats(v)]));
    return {
      cell,
      n: ok.length,
      failures: mine.filter((r) => !r.ok).map((r) => ({ run: r.run, error: r.error ?? "unknown error" })),
      archiveBytes,
      phases: phaseStats,
      backupMBps: mbps(archiveBytes, phaseStats["backup.transfer"]?.median),
      restoreMBps: mbps(archiveBytes, phaseStats["restore.transfer"]?.median),
    };
  });
  return {
    matrixId, name,
    total: cells.length * runsPerCell,
    done: results.length,
    failed: results.filter((r) => !r.ok).length,
    rows,
    updatedAt: new Date().toISOString(),
  };
}

export function summaryMarkdown(sum: Summary): string {
  const cell = (c: string) => c.replaceAll("|", "/");
  const lines = [
    `# ${sum.name} (${sum.matrixId})`,
    "",
    `${sum.done} of ${sum.total} runs done, ${sum.failed} failed. Medians of n runs (min–max).`,
    "",
    `| ${SUMMARY_HEAD.join(" | ")} |`,
    `| --- | --- | --- | ${SUMMARY_HEAD.slice(3, -1).map(() => "--:").join(" | ")} | --- |`,
    // A failure's error is cut short in Markdown: the JSON beside it keeps the whole message.
    ...summaryCells(sum).map((row) => `| ${row.map((c, i) => cell(i === row.length - 1 ? c.slice(0, 160) : c)).join(" | ")} |`),
    "",
    "Where the time goes: median seconds of each phase; overhead is the wall clock from the first step to the last",
    "that no phase measured as its own work (step scheduling, retries).",
    "",
    `| ${BREAKDOWN_HEAD.join(" | ")} |`,
    `| --- | --- | --- | ${BREAKDOWN_HEAD.slice(3).map(() => "--:").join(" | ")} |`,
    ...breakdownCells(sum).map((row) => `| ${row.map(cell).join(" | ")} |`),
  ];
  return lines.join("\n") + "\n";
}
