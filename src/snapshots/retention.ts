// The cron trigger's lifecycle run: reconcile the index with the store, plan with restic forget's rules
// (forget-plan.ts) over every snapshot and policy, delete what the plan removes (dependants first; a delete that
// is refused — a restore holds it, a delta appeared — keeps the snapshot, with the refusal as its reason), and
// write the report — what was kept and why, what was removed and why — to KV (retention:latest) and the log.
import type { Deps } from "../deps.ts";
import { errorMessage, SnapflowError } from "../errors.ts";
import { KV_KEYS } from "../kv-keys.ts";
import { deleteSnapshot } from "./delete-snapshot.ts";
import { planForget, type ForgetPlan } from "./forget-plan.ts";
import { allSnapshots } from "./list-snapshots.ts";
import { listPolicies } from "./policies.ts";
import { reconcileIndex } from "./reconcile-index.ts";

export interface RetentionReport {
  at: string;
  policies: number;
  kept: ForgetPlan["kept"];
  removed: ForgetPlan["removed"];
  /** planned for removal, but the delete was refused (in use) or failed: kept for now */
  refused: { id: string; reason: string; error: string }[];
  /** index entries dropped (no record) and records indexed again, before planning */
  reconciled: { dropped: string[]; reindexed: string[] };
}

export async function applyRetention(d: Deps, now: Date): Promise<RetentionReport> {
  const reconciled = await reconcileIndex(d);
  const [snapshots, policies] = await Promise.all([allSnapshots(d.kv), listPolicies(d.store)]);
  const plan = planForget(snapshots, policies, now.getTime());
  const removed: RetentionReport["removed"] = [];
  const refused: RetentionReport["refused"] = [];
  const gone = new Set<string>();
  for (const r of plan.removed) {
    if (gone.has(r.id)) continue;
    try {
      (await deleteSnapshot(d, r.id)).deleted.forEach((id) => gone.add(id));
      removed.push(r);
    } catch (e) {
      // In use (a restore, a new delta) or a store failure: keep it this time; the next run tries again.
      if (!(e instanceof SnapflowError) || e.code !== "snapshot_in_use") console.error(`retention: deleting ${r.id} failed`, e);
      refused.push({ ...r, error: errorMessage(e) });
    }
  }
  const report: RetentionReport = { at: now.toISOString(), policies: policies.length, kept: plan.kept, removed, refused, reconciled };
  await d.kv.put(KV_KEYS.retentionLatest, JSON.stringify(report));
  console.log(`retention: kept ${plan.kept.length}, removed ${removed.length}, refused ${refused.length}` +
    removed.map((r) => `\n  removed ${r.id}: ${r.reason}`).join("") + plan.kept.map((k) => `\n  kept ${k.id}: ${k.reasons.join("; ")}`).join(""));
  return report;
}

export async function latestRetention(kv: KVNamespace): Promise<RetentionReport | null> {
  return kv.get<RetentionReport>(KV_KEYS.retentionLatest, "json");
}
