// The CLI's snapshot lifecycle commands: list snapshots as a table, delete one, set or show a retention policy,
// show the last retention run. Each returns the process exit code; API refusals propagate as ApiCallError.
import type { apiClient } from "./api-client.ts";

type Api = ReturnType<typeof apiClient>;

interface Summary {
  id: string; createdAt: string; strategy: string; source: { sandboxId: string; path: string };
  archiveBytes: number; files: number; bytes: number; name?: string; labels?: Record<string, string>; expiresAt?: string; base?: string;
}

/** Columns of text, each as wide as its widest cell. */
export function table(head: string[], rows: string[][]): string {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  return [head, ...rows].map((r) => r.map((c, i) => c.padEnd(widths[i]!)).join("  ").trimEnd()).join("\n");
}

const mb = (n: number) => (n / 1e6).toFixed(n < 1e7 ? 2 : 1);
const when = (iso: string) => iso.replace("T", " ").slice(0, 19);

export interface SnapshotsOptions {
  sandbox?: string; path?: string; label?: string[]; since?: string; until?: string; name?: string; limit?: string; cursor?: string; json?: boolean;
}

export async function snapshotsCommand(api: Api, o: SnapshotsOptions): Promise<number> {
  const q = new URLSearchParams();
  if (o.sandbox) q.set("sandboxId", o.sandbox);
  if (o.path) q.set("path", o.path);
  for (const l of o.label ?? []) q.append("label", l);
  if (o.since) q.set("since", o.since);
  if (o.until) q.set("until", o.until);
  if (o.name) q.set("name", o.name);
  if (o.limit) q.set("limit", o.limit);
  if (o.cursor) q.set("cursor", o.cursor);
  const r = await api.call<{ snapshots: Summary[]; cursor?: string }>("GET", `/api/snapshots${q.size ? `?${q}` : ""}`);
  if (o.json) {
    console.log(JSON.stringify(r, null, 2));
    return 0;
  }
  console.log(table(
    ["ID", "CREATED (UTC)", "SANDBOX", "PATH", "STRATEGY", "ARCHIVE MB", "FILES", "NAME", "LABELS", "BASE", "EXPIRES"],
    r.snapshots.map((s) => [
      s.id, when(s.createdAt), s.source.sandboxId, s.source.path, s.strategy, mb(s.archiveBytes), String(s.files),
      s.name ?? "", Object.entries(s.labels ?? {}).map(([k, v]) => `${k}=${v}`).join(","), s.base ?? "", s.expiresAt ? when(s.expiresAt) : "",
    ]),
  ));
  console.error(`${r.snapshots.length} snapshot(s)${r.cursor ? `; more: --cursor ${r.cursor}` : ""}`);
  return 0;
}

/** "k=v" flags as a labels object; a flag without '=' is a usage error. */
export function labelsFromFlags(flags: string[] | undefined, usage: (m: string) => never): Record<string, string> | undefined {
  if (!flags?.length) return undefined;
  return Object.fromEntries(flags.map((f) => {
    const eq = f.indexOf("=");
    return eq > 0 ? [f.slice(0, eq), f.slice(eq + 1)] : usage(`--label must be key=value, got '${f}'`);
  }));
}

export async function deleteCommand(api: Api, id: string, cascade: boolean): Promise<number> {
  const r = await api.call<{ deleted: string[] }>("DELETE", `/api/snapshots/${encodeURIComponent(id)}${cascade ? "?cascade=true" : ""}`);
  for (const d of r.deleted) console.log(`deleted ${d}`);
  return 0;
}

interface Policy { sandboxId: string; path: string; keepLast?: number; keepDaily?: number; keepWeekly?: number; updatedAt: string }

const rules = (p: Policy) => [["keepLast", p.keepLast], ["keepDaily", p.keepDaily], ["keepWeekly", p.keepWeekly]].filter(([, n]) => n).map(([k, n]) => `${k}=${n}`).join(" ");

export interface PolicyOptions { sandbox?: string; path?: string; "keep-last"?: string; "keep-daily"?: string; "keep-weekly"?: string; delete?: boolean; json?: boolean }

/** With --keep-* flags: set the policy of --sandbox/--path; with --delete: remove it; otherwise show it (or all). */
export async function policyCommand(api: Api, o: PolicyOptions, usage: (m: string) => never): Promise<number> {
  const keep: Record<string, number> = {};
  for (const [flag, field] of [["keep-last", "keepLast"], ["keep-daily", "keepDaily"], ["keep-weekly", "keepWeekly"]] as const) {
    const v = o[flag];
    if (v === undefined) continue;
    const n = Number(v);
    keep[field] = Number.isInteger(n) && n >= 0 ? n : usage(`--${flag} must be a whole number`);
  }
  const where = o.sandbox && new URLSearchParams({ sandboxId: o.sandbox, path: o.path ?? "/workspace" });
  if (Object.keys(keep).length || o.delete) {
    if (!where) usage("--sandbox is required to set or delete a policy");
    if (o.delete) {
      await api.call("DELETE", `/api/policies?${where}`);
      console.log(`policy for ${o.sandbox}:${o.path ?? "/workspace"} deleted: its snapshots are kept until deleted or expired`);
      return 0;
    }
    const p = await api.call<Policy>("PUT", `/api/policies?${where}`, keep);
    console.log(`policy for ${p.sandboxId}:${p.path}: ${rules(p)} (applied by the hourly cron trigger)`);
    return 0;
  }
  const q = o.sandbox ? (o.path ? `?${where}` : `?sandboxId=${encodeURIComponent(o.sandbox)}`) : "";
  const r = await api.call<Policy | { policies: Policy[] }>("GET", `/api/policies${q}`);
  const list = "policies" in r ? r.policies : [r];
  if (o.json) console.log(JSON.stringify(list, null, 2));
  else console.log(table(["SANDBOX", "PATH", "RULES", "UPDATED (UTC)"], list.map((p) => [p.sandboxId, p.path, rules(p), when(p.updatedAt)])));
  return 0;
}

interface RetentionReport {
  at: string; policies: number;
  kept: { id: string; reasons: string[] }[]; removed: { id: string; reason: string }[]; refused: { id: string; reason: string; error: string }[];
  reconciled: { dropped: string[]; reindexed: string[] };
}

/** The last retention run: what it removed and kept, and why. */
export async function retentionCommand(api: Api, json: boolean): Promise<number> {
  const r = await api.call<RetentionReport>("GET", "/api/retention");
  if (json) {
    console.log(JSON.stringify(r, null, 2));
    return 0;
  }
  console.log(`retention run at ${when(r.at)} UTC, ${r.policies} polic${r.policies === 1 ? "y" : "ies"}`);
  console.log(table(["SNAPSHOT", "ACTION", "WHY"], [
    ...r.removed.map((x) => [x.id, "removed", x.reason]),
    ...r.refused.map((x) => [x.id, "kept (delete refused)", `${x.reason}; ${x.error}`]),
    ...r.kept.map((x) => [x.id, "kept", x.reasons.join("; ")]),
  ]));
  if (r.reconciled.dropped.length || r.reconciled.reindexed.length) {
    console.log(`index repaired: dropped ${r.reconciled.dropped.join(", ") || "none"}; re-indexed ${r.reconciled.reindexed.join(", ") || "none"}`);
  }
  return 0;
}

interface ChunkGcReport {
  at: string; graceSeconds: number; dryRun: boolean;
  indexes: { recorded: number; pending: number; abandoned: number; readLate: number };
  chunks: { listed: number; referenced: number; young: number; deleted: number; spared: number };
  bytesDeleted: number; ms: number;
}

/** Collects chunks no snapshot's index references and older than the grace period (the hourly cron does too). */
export async function gcCommand(api: Api, o: { "grace-seconds"?: string; "dry-run"?: boolean; json?: boolean }, usage: (m: string) => never): Promise<number> {
  const grace = o["grace-seconds"] === undefined ? undefined : Number(o["grace-seconds"]);
  if (grace !== undefined && !(Number.isInteger(grace) && grace >= 0)) usage("--grace-seconds must be a whole number");
  const r = await api.call<ChunkGcReport>("POST", "/api/chunks/gc", { ...(grace !== undefined ? { graceSeconds: grace } : {}), dryRun: o["dry-run"] ?? false });
  if (o.json) {
    console.log(JSON.stringify(r, null, 2));
    return 0;
  }
  const c = r.chunks;
  console.log(`chunk gc${r.dryRun ? " (dry run)" : ""}: ${c.listed} chunks, ${c.referenced} referenced by ${r.indexes.recorded} snapshots and ${r.indexes.pending} running backups, ` +
    `${c.young} younger than ${r.graceSeconds} s kept, ${c.spared} spared for backups that started meanwhile; ${r.dryRun ? "would delete" : "deleted"} ${c.deleted} (${r.bytesDeleted} bytes) in ${r.ms} ms`);
  return 0;
}
