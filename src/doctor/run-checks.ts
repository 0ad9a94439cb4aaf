// A 10 MB backup and restore per default preset, through the same Workflows as every run (under their target
// leases, as the API starts them), each verified by its own verify step and timed; then everything the runs wrote
// is removed: the snapshot (deleteSnapshot), the restore record, their KV progress. The SDK's own presets (its
// createBackup, then its restoreBackup) run where there is an SDK container, and say why not elsewhere.
import type { ProbeResult } from "../../container/contract/protocol.ts";
import type { Deps } from "../deps.ts";
import { newId } from "../ids.ts";
import { KV_KEYS } from "../kv-keys.ts";
import type { BackupParams } from "../backup/backup-params.ts";
import type { RestoreParams } from "../restore/restore-params.ts";
import { workflowOf, type RunKind } from "../runs/run-liveness.ts";
import { startRunUnderLease } from "../runs/start-run.ts";
import { AgentClient } from "../sandbox/agent-client.ts";
import { deleteSnapshot } from "../snapshots/delete-snapshot.ts";
import { readProgress, restoreRecordKey } from "../snapshots/records.ts";
import { leasePrefix } from "../snapshots/restore-leases.ts";
import { TARGETS_PREFIX } from "../snapshots/target-leases.ts";
import { DEFAULT_BACKUP, findBackup, restoresFor, unavailableReason, type BackupStrategy } from "../strategies/registry.ts";
import { runCheck, type DoctorCheck } from "./doctor-check.ts";

export const RUN_CHECKS = {
  default: "runs: 10 MB backup and restore, default presets",
  sdk: "runs: 10 MB backup and restore with the SDK's own (sdk-backup, sdk-restore)",
} as const;

/** What the runs made, for the cleanup. */
export interface RunTrail {
  snapshots: string[];
  restores: string[];
}

const DATASET = { kind: "node-modules" as const, seed: 27, files: 300, bytes: 10_000_000 };

/** Polls a run's Workflow until it ends: its output, or its error with the run's own message. */
async function finished(env: Env, d: Deps, kind: RunKind, id: string, timeoutMs = 10 * 60_000): Promise<{ ok: boolean; error?: string; steps: Record<string, { ms: number; bytes: number }> }> {
  const instance = await workflowOf(env, kind).get(id);
  for (const deadline = Date.now() + timeoutMs; ; ) {
    const s = await instance.status();
    if (s.status === "complete" || s.status === "errored" || s.status === "terminated") {
      const progress = await readProgress(d.kv, id);
      const steps = (progress?.steps ?? {}) as Record<string, { ms: number; bytes: number }>;
      return s.status === "complete" ? { ok: true, steps } : { ok: false, error: progress?.error ?? s.error?.message ?? s.status, steps };
    }
    if (Date.now() > deadline) return { ok: false, error: `still ${s.status} after ${timeoutMs / 1000} s`, steps: {} };
    await new Promise((r) => setTimeout(r, 250));
  }
}

const timings = (steps: Record<string, { ms: number }>) => Object.entries(steps).map(([n, s]) => `${n} ${s.ms}`).join(", ");

/** One backup, then its default restore (or `restoreName`) into a second directory: both Workflows, both verified. */
async function backupAndRestore(env: Env, d: Deps, sandboxId: string, s: BackupStrategy, trail: RunTrail, tag: string, restoreName?: string): Promise<{ ok: boolean; detail: string }> {
  const source = `/workspace/doctor-${tag}`, target = `/workspace/doctor-${tag}-restored`;
  const made = await new AgentClient(d.transport, sandboxId).generateDataset({ path: source, ...DATASET });
  const snapshotId = newId("bk");
  const bp: BackupParams = { snapshotId, sandboxId, path: source, strategy: s.name, startedAt: new Date().toISOString(), name: "snapflow doctor" };
  trail.snapshots.push(snapshotId);
  let t = Date.now();
  await startRunUnderLease(env, d, "backup", snapshotId, { sandboxId, path: source }, bp);
  const backup = await finished(env, d, "backup", snapshotId);
  const backupMs = Date.now() - t;
  if (!backup.ok) return { ok: false, detail: `backup ${s.name} (${made.bytes} bytes, ${made.files} files) failed: ${backup.error}` };
  // The restore the API picks for this format by default (POST /api/restores).
  const fits = restoresFor(s.format);
  const restore = fits.find((r) => r.name === restoreName) ?? fits.find((r) => r.path === "presigned-pipe") ?? fits.find((r) => r.path === "push-pipe") ?? fits[0]!;
  const restoreId = newId("rs");
  const rp: RestoreParams = { restoreId, snapshotId, sandboxId, path: target, strategy: restore.name, replace: false, startedAt: new Date().toISOString() };
  trail.restores.push(restoreId);
  t = Date.now();
  await startRunUnderLease(env, d, "restore", restoreId, { sandboxId, path: target }, rp);
  const restored = await finished(env, d, "restore", restoreId);
  const restoreMs = Date.now() - t;
  if (!restored.ok) return { ok: false, detail: `backup ${s.name} ok in ${backupMs} ms; restore ${restore.name} failed: ${restored.error}` };
  const bytes = (backup.steps.transfer?.bytes ?? 0);
  return {
    ok: true,
    detail: `${made.files} files, ${(made.bytes / 1e6).toFixed(1)} MB: backup ${s.name} ${backupMs} ms (${timings(backup.steps)}; archive ${(bytes / 1e6).toFixed(1)} MB), restore ${restore.name} ${restoreMs} ms (${timings(restored.steps)}), verified by each run's verify step`,
  };
}

export async function runChecks(env: Env, d: Deps, sandboxId: string, probe: ProbeResult, trail: RunTrail): Promise<DoctorCheck[]> {
  const out = [await runCheck(RUN_CHECKS.default, "backups or restores fail in this deployment: each run's error above says where", () => backupAndRestore(env, d, sandboxId, findBackup(DEFAULT_BACKUP)!, trail, "default"))];
  const sdk = findBackup("sdk-backup")!;
  out.push(await runCheck(RUN_CHECKS.sdk, "the sdk-backup and sdk-restore presets are unavailable; every other preset is unaffected", async () => {
    const reason = unavailableReason(sdk, probe, d.transport.kind);
    return reason ? { skipped: reason } : backupAndRestore(env, d, sandboxId, sdk, trail, "sdk", "sdk-restore");
  }));
  return out;
}

/**
 * Removes what the runs wrote: snapshots (archive, manifest, record, index), restore records, run progress; and
 * lists what would still be there: those, restore leases on the snapshots, target leases in the doctor's sandbox.
 */
export async function cleanRuns(d: Deps, trail: RunTrail, sandboxId: string): Promise<string[]> {
  const left: string[] = [];
  for (const id of trail.snapshots) {
    await deleteSnapshot(d, id).catch((e) => void (/no snapshot|does not exist|not_found/i.test(String(e)) || left.push(`snapshot ${id}: ${e instanceof Error ? e.message : String(e)}`)));
    const rest = (await d.store.list(`snapshots/${id}/`)).objects.map((o) => o.key);
    await d.store.delete(rest);
  }
  for (const id of trail.restores) await d.store.delete(restoreRecordKey(id));
  for (const id of [...trail.snapshots, ...trail.restores]) await d.kv.delete(KV_KEYS.run(id)).then(() => d.kv.delete(KV_KEYS.interrupted(id)));
  for (const id of trail.snapshots) left.push(...(await d.store.list(`snapshots/${id}/`)).objects.map((o) => o.key));
  for (const id of trail.restores) if (await d.store.head(restoreRecordKey(id))) left.push(restoreRecordKey(id));
  for (const prefix of [...trail.snapshots.map(leasePrefix), `${TARGETS_PREFIX}${sandboxId}/`]) left.push(...(await d.store.list(prefix)).objects.map((o) => o.key));
  return left;
}
