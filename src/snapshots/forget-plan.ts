// Which snapshots to keep, and why — restic forget's rules, as a pure function of the index and the policies:
//
//   for each (sandbox, path) with a policy, its unexpired snapshots newest first:
//     keepLast n    the n newest
//     keepDaily n   the newest of each of the n newest days (UTC) that have snapshots
//     keepWeekly n  the newest of each of the n newest ISO weeks that have snapshots
//     anything no rule keeps goes
//   without a policy, a snapshot stays; with a ttl, it goes once expired, whatever a policy says
//   then: a snapshot that a kept one builds on (a delta's base, and its base…) stays, "base of <id>" — down to
//   the first base with a compaction (compactions.ts): that compaction stays instead, "compaction under <id>",
//   and what lies below it is not needed by the kept one
//   a compaction belongs to no policy group: it stays while a kept snapshot resolves through it, else goes
//
// Removals come dependants first (deepest delta chain first), so each delete finds no dependants left.
import type { SnapshotSummary } from "./records.ts";

export interface KeepRules {
  keepLast?: number;
  keepDaily?: number;
  keepWeekly?: number;
}

export interface Policy extends KeepRules {
  sandboxId: string;
  path: string;
}

export interface ForgetPlan {
  kept: { id: string; reasons: string[] }[];
  /** in the order to delete */
  removed: { id: string; reason: string }[];
}

const groupOf = (sandboxId: string, path: string) => `${sandboxId}\u0000${path}`;
const day = (t: Date) => t.toISOString().slice(0, 10);

/** ISO 8601 week: the week with the year's first Thursday is week 1; weeks start on Monday. */
export function isoWeek(t: Date): string {
  const d = new Date(Date.UTC(t.getUTCFullYear(), t.getUTCMonth(), t.getUTCDate()));
  const weekday = d.getUTCDay() || 7;
  d.setUTCDate(d.getUTCDate() + 4 - weekday);
  const yearStart = Date.UTC(d.getUTCFullYear(), 0, 1);
  const week = Math.ceil(((d.getTime() - yearStart) / 86_400_000 + 1) / 7);
  return `${d.getUTCFullYear()}-W${String(week).padStart(2, "0")}`;
}

/** restic's bucket rule: keep the newest snapshot of each of the first n distinct buckets. */
function keepBuckets(newestFirst: SnapshotSummary[], n: number | undefined, bucket: (t: Date) => string, label: string, reasons: Map<string, string[]>) {
  if (!n) return;
  let last: string | undefined;
  let count = 0;
  for (const s of newestFirst) {
    const b = bucket(new Date(s.createdAt));
    if (b === last) continue;
    last = b;
    if (count++ >= n) return;
    reasons.get(s.id)!.push(`${label} ${b}`);
  }
}

export function planForget(snapshots: SnapshotSummary[], policies: Policy[], now: number): ForgetPlan {
  const byId = new Map(snapshots.map((s) => [s.id, s]));
  const policyOf = new Map(policies.map((p) => [groupOf(p.sandboxId, p.path), p]));
  const reasons = new Map<string, string[]>(snapshots.map((s) => [s.id, []]));
  const removal = new Map<string, string>();

  const groups = new Map<string, SnapshotSummary[]>();
  const compactionOf = new Map(snapshots.filter((s) => s.compacts).map((s) => [s.compacts!, s.id]));
  for (const s of snapshots) {
    if (s.compacts) continue;
    if (s.expiresAt && Date.parse(s.expiresAt) <= now) {
      removal.set(s.id, `expired at ${s.expiresAt}`);
      continue;
    }
    const g = groupOf(s.source.sandboxId, s.source.path);
    if (!policyOf.has(g)) {
      reasons.get(s.id)!.push(s.expiresAt ? `no policy; expires ${s.expiresAt}` : "no policy");
      continue;
    }
    groups.set(g, [...(groups.get(g) ?? []), s]);
  }
  for (const [g, members] of groups) {
    const p = policyOf.get(g)!;
    const newestFirst = [...members].sort((a, b) => b.createdAt.localeCompare(a.createdAt) || b.id.localeCompare(a.id));
    newestFirst.slice(0, p.keepLast ?? 0).forEach((s, i) => reasons.get(s.id)!.push(`last ${i + 1} of ${p.keepLast}`));
    keepBuckets(newestFirst, p.keepDaily, day, "daily", reasons);
    keepBuckets(newestFirst, p.keepWeekly, isoWeek, "weekly", reasons);
    for (const s of newestFirst) if (!reasons.get(s.id)!.length) removal.set(s.id, `not kept by the policy for ${p.sandboxId}:${p.path}`);
  }

  // A kept snapshot's bases stay, whatever took them off the list, down to a compacted one: its compaction stays.
  for (const s of snapshots) {
    if (removal.has(s.id) || s.compacts) continue;
    for (let base = s.base, child = s.id; base; child = base, base = byId.get(base)?.base) {
      const compaction = compactionOf.get(base);
      if (compaction) {
        reasons.get(compaction)!.push(`compaction under ${child}`);
        break;
      }
      if (!byId.has(base)) break;
      reasons.get(base)!.push(`base of ${child}`);
      removal.delete(base);
    }
  }
  for (const s of snapshots) if (s.compacts && !reasons.get(s.id)!.length) removal.set(s.id, `compaction of ${s.compacts}, which no kept snapshot resolves through`);

  const depth = (id: string) => {
    let n = 0;
    for (let b = byId.get(id)?.base; b && n < 1000; b = byId.get(b)?.base) n++;
    return n;
  };
  const removed = [...removal].map(([id, reason]) => ({ id, reason })).sort((a, b) => depth(b.id) - depth(a.id) || a.id.localeCompare(b.id));
  const kept = snapshots.filter((s) => !removal.has(s.id)).map((s) => ({ id: s.id, reasons: [...new Set(reasons.get(s.id))] }));
  return { kept, removed };
}
