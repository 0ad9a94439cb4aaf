// The load run's criteria, stated once so the report and the exit code agree:
// - no failure: every backup and restore complete, every matrix run done and ok, nothing dead-lettered;
// - memory flat: over the matrix (the same small runs repeated), the median RSS of the second half of the samples
//   is at most 10 % + 16 MiB above the first half's, for workerd and for the agent (a leak grows with every run);
// - descriptors and mounts back: once the load's sandboxes are ended (and up to a minute to settle), mounts under
//   the project equal their count before the load, and open descriptors are at most a few above it (workerd may
//   keep pooled keep-alive connections: 16; the agent: 4). workerd's are judged without the local Workflows
//   engine's per-instance SQLite files (resources.ts), which it never closes; those are reported, and must be
//   three per Workflow instance it holds open, nothing else.
import type { RunOutcome, MatrixOutcome } from "./load-work.ts";
import type { ResourceSample } from "./resources.ts";

export const RSS_RATIO = 1.1;
export const RSS_SLACK = 16 * 2 ** 20;
export const FD_SLACK = { workerd: 16, agent: 4 };

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  if (!s.length) return 0;
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

export interface Halves {
  firstMedian: number;
  secondMedian: number;
  ok: boolean;
}

export function halves(values: number[]): Halves {
  const mid = Math.floor(values.length / 2);
  const firstMedian = median(values.slice(0, mid));
  const secondMedian = median(values.slice(mid));
  return { firstMedian, secondMedian, ok: values.length >= 4 && secondMedian <= firstMedian * RSS_RATIO + RSS_SLACK };
}

export interface Verdicts {
  failures: string[];
  rss: { workerd: Halves; agent: Halves };
  fdsBack: boolean;
  mountsBack: boolean;
  ok: boolean;
}

/** workerd's descriptors other than the Workflows engine's instance databases. */
export const workerdOwnFds = (s: ResourceSample) => s.workerdFds - s.workerdWorkflowDbFds;

export function fdsBack(before: ResourceSample, after: ResourceSample): boolean {
  return workerdOwnFds(after) <= workerdOwnFds(before) + FD_SLACK.workerd && after.agentFds <= before.agentFds + FD_SLACK.agent &&
    after.workerdWorkflowDbFds === 3 * after.workflowInstancesOpen;
}

export function judge(o: { firsts: RunOutcome[]; burst: RunOutcome[]; matrix: MatrixOutcome | null; matrixSamples: ResourceSample[]; before: ResourceSample; after: ResourceSample; cleanupErrors: string[] }): Verdicts {
  const failures = [
    ...[...o.firsts, ...o.burst].filter((r) => r.status !== "complete").map((r) => `${r.kind} ${r.id || "(not started)"} in ${r.sandboxId} (${r.strategy}): ${r.error ?? r.status}`),
    ...(o.matrix ? [] : ["the matrix did not run"]),
    ...(o.matrix && o.matrix.progress.status !== "complete" ? [`matrix ${o.matrix.id} not complete: ${o.matrix.progress.done}/${o.matrix.progress.total}`] : []),
    ...(o.matrix?.summary.rows.flatMap((row) => row.failures.map((f) => `matrix run ${row.cell.backup} → ${row.cell.restore} #${f.run}: ${f.error}`)) ?? []),
    ...(o.matrix?.progress.deadLettered.map((d) => `dead-lettered: ${d.reason}`) ?? []),
    ...o.cleanupErrors.map((e) => `ending a sandbox: ${e}`),
  ];
  const rss = { workerd: halves(o.matrixSamples.map((s) => s.workerdRss)), agent: halves(o.matrixSamples.map((s) => s.agentRss)) };
  const fds = fdsBack(o.before, o.after);
  const mounts = o.after.mounts === o.before.mounts;
  return { failures, rss, fdsBack: fds, mountsBack: mounts, ok: !failures.length && rss.workerd.ok && rss.agent.ok && fds && mounts };
}
