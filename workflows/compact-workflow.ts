// CompactWorkflow: the background compaction of an overlay chain (issue 24; src/snapshots/compactions.ts). Started
// after a sleep is recorded (src/compaction/start-compaction.ts), never waited for by a sleep or a wake:
//
//   restore …   the delta woken read-only-in-effect in a compactor sandbox of its own (lazy-overlay-restore: its
//               chain laid under an empty upper; not walked here: the check below does it once)
//   backup …    that tree backed up whole as squashfs-chunked, recorded as compacting the delta: its chunks dedup
//               against the store, so only what the image lacks uploads; its single pass hashes every file
//   compaction verify  the tree's metadata walked and, with the image's hashes, compared with the delta's manifest
//               (src/compaction/compaction-check.ts): one read of the tree, not a hashing walk and then the image's
//   point       its totals checked against the delta's, then compactions/<delta>.json names it: from here chains
//               through the delta resolve through it
//   release     the compactor sandbox destroyed (its mounts with it)
//
// A failure before `point` leaves the chain exactly as it was: a half-made compaction is removed (recorded or not),
// and nothing points at it.
import { WorkflowEntrypoint, type WorkflowEvent, type WorkflowStep } from "cloudflare:workers";
import { NonRetryableError } from "cloudflare:workflows";
import type { BackupParams } from "../src/backup/backup-params.ts";
import { cleanupBackup } from "../src/backup/backup-phases.ts";
import { runBackupPhases } from "../src/backup/run-backup.ts";
import { checkCompactedTree } from "../src/compaction/compaction-check.ts";
import { COMPACTOR_PATH, CompactParams, compactionIds } from "../src/compaction/compaction-params.ts";
import { depsFrom } from "../src/deps.ts";
import { SnapflowError } from "../src/errors.ts";
import type { RestoreParams, RestoreProbeResult } from "../src/restore/restore-params.ts";
import { cleanupRestore } from "../src/restore/restore-phases.ts";
import { runRestorePhases } from "../src/restore/run-restore.ts";
import { recordContentChecked } from "../src/restore/content-check.ts";
import { pointCompaction } from "../src/snapshots/compactions.ts";
import { deleteSnapshot } from "../src/snapshots/delete-snapshot.ts";
import { reportProgress } from "../src/snapshots/progress.ts";
import { readSnapshot, type RunProgress } from "../src/snapshots/records.ts";
import { findBackup, findRestore } from "../src/strategies/registry.ts";
import { errorMessage, stepConfigs, stepRunner } from "./step-config.ts";

export const COMPACT_WAKE = "lazy-overlay-restore";
export const COMPACT_BACKUP = "squashfs-chunked";

export interface CompactOutput {
  delta: string;
  compactionId: string;
  steps: Record<string, unknown>;
}

export class CompactWorkflow extends WorkflowEntrypoint<Env, CompactParams> {
  async run(event: WorkflowEvent<CompactParams>, step: WorkflowStep): Promise<CompactOutput> {
    const parsed = CompactParams.safeParse(event.payload);
    if (!parsed.success) throw new NonRetryableError(`compaction params: ${parsed.error.issues[0]!.path.join(".")}: ${parsed.error.issues[0]!.message}`);
    const p = parsed.data;
    const { compactionId, restoreId, sandboxId } = compactionIds(p.delta);
    const d = depsFrom(this.env);
    const configs = stepConfigs(this.env);
    const wake = findRestore(COMPACT_WAKE)!;
    const whole = findBackup(COMPACT_BACKUP)!;
    const rp: RestoreParams = { restoreId, snapshotId: p.delta, sandboxId, path: COMPACTOR_PATH, strategy: wake.name, tenant: p.tenant, replace: false };
    const bp: BackupParams = { snapshotId: compactionId, sandboxId, path: COMPACTOR_PATH, strategy: whole.name, tenant: p.tenant, compacts: p.delta };
    const restoreRun = stepRunner(step, { configs, prefix: "restore" });
    const backupRun = stepRunner(step, { configs, prefix: "backup" });
    const checkRun = stepRunner(step, { configs, prefix: "compaction" });
    const progress: RunProgress = { id: compactionId, kind: "backup", status: "running", strategy: whole.name, startedAt: event.timestamp.toISOString(), steps: {}, snapshotId: compactionId };
    const steps = () => ({ ...Object.fromEntries(Object.entries(restoreRun.steps).map(([k, v]) => [`restore ${k}`, v])), ...Object.fromEntries(Object.entries(backupRun.steps).map(([k, v]) => [`backup ${k}`, v])), ...Object.fromEntries(Object.entries(checkRun.steps).map(([k, v]) => [`compaction ${k}`, v])) });
    await reportProgress(d.kv, progress);
    let probed: RestoreProbeResult | undefined;
    try {
      await runRestorePhases(restoreRun, d, rp, wake, { record: false, deferCheck: true, onProbed: (x) => (probed = x) });
      await runBackupPhases(backupRun, d, bp, whole);
      await checkRun.run("verify", () => checkCompactedTree(d, rp, probed!, compactionId));
      await step.do("point", configs.record, async () => {
        const t = performance.now();
        const [delta, compaction] = await Promise.all([readSnapshot(d.store, d.kv, p.delta), readSnapshot(d.store, d.kv, compactionId)]);
        if (!delta) throw new SnapflowError("snapshot_unusable", `overlay delta ${p.delta} was deleted while it was being compacted`);
        // The tree was checked against the delta's manifest with the image's hashes; its totals must be the delta's.
        const a = delta.manifest, b = compaction!.manifest;
        if (a.files !== b.files || a.dirs !== b.dirs || a.symlinks !== b.symlinks || a.bytes !== b.bytes) {
          throw new SnapflowError("snapshot_unusable", `compaction ${compactionId} holds ${b.files} files, ${b.dirs} dirs, ${b.bytes} bytes; ${p.delta}'s tree ${a.files}, ${a.dirs}, ${a.bytes}`);
        }
        // Made here, in a sandbox of ours, of a tree whose every file's hash (taken as the image read it) was just
        // compared with the delta's manifest: its content needs no second check on the wakes that resolve through it
        // (src/restore/content-check.ts).
        await recordContentChecked(d, { snapshotId: compactionId, sandboxId, restoreId });
        await pointCompaction(d.store, compaction!);
        return { ms: Math.round(performance.now() - t), bytes: 0 };
      });
    } catch (e) {
      // Nothing may point at a half-made compaction, and none stays: the chain is as it was.
      await step.do("undo", configs.cleanup, async () => {
        const touched = probed;
        if (touched) await cleanupRestore(d, rp, wake, touched).catch((c) => console.warn(`compaction ${compactionId}: restore cleanup: ${errorMessage(c)}`));
        if (await readSnapshot(d.store, d.kv, compactionId)) await deleteSnapshot(d, compactionId);
        else await cleanupBackup(d, bp, whole);
        return { ms: 0, bytes: 0 };
      });
      await step.do("release", configs.cleanup, () => release(d, sandboxId));
      await reportProgress(d.kv, { ...progress, steps: steps(), status: "errored", error: errorMessage(e) });
      throw e;
    }
    await step.do("release", configs.cleanup, () => release(d, sandboxId));
    await reportProgress(d.kv, { ...progress, steps: steps(), status: "complete" });
    return { delta: p.delta, compactionId, steps: steps() };
  }
}

/** The compactor sandbox goes, its mounts (the lazy image's helper) with it. */
async function release(d: ReturnType<typeof depsFrom>, sandboxId: string) {
  await d.transport.destroy(sandboxId).catch((e) => console.warn(`compactor sandbox ${sandboxId} not destroyed: ${errorMessage(e)}`));
  return { ms: 0, bytes: 0 };
}
