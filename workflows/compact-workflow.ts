// CompactWorkflow: the background compaction of an overlay chain (issue 24; src/snapshots/compactions.ts). Started
// after a sleep is recorded (src/compaction/start-compaction.ts), never waited for by a sleep or a wake:
//
//   compaction probe  the chain the delta resolves to: over a chunked image, or over a file-level snapshot
//   restore …   the delta woken read-only-in-effect in a compactor sandbox of its own (lazy-overlay-restore, or
//               files-overlay-restore: its chain laid under an empty upper; not walked here: the check below does it once)
//   backup …    over a chunked image: that tree backed up whole as squashfs-chunked, recorded as compacting the
//               delta: its chunks dedup against the store, so only what the image lacks uploads; its single pass
//               hashes every file. Over a file-level snapshot: files-cas with that snapshot as its parent, walking
//               only the directories the chain's layer directories hold and reading only the names they hold
//               (filecas lower.go): the rest is the base's index, taken as it is, so a compaction costs what the
//               chain changed, not the tree
//   compaction verify  the backup's manifest (its single pass's walk and hashes) compared with the delta's manifest
//               (src/compaction/compaction-check.ts): the tree read once, by the backup, and not walked again
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
import { readOverlayChain } from "../src/snapshots/overlay-chain.ts";
import { readSnapshot, type RunProgress } from "../src/snapshots/records.ts";
import { findBackup, findRestore } from "../src/strategies/registry.ts";
import { errorMessage, stepConfigs, stepRunner } from "./step-config.ts";

/** A chain over a chunked image is compacted into a chunked image; one over a file-level snapshot, into a file-level one. */
export const COMPACT_WAKE = { image: "lazy-overlay-restore", files: "files-overlay-restore" } as const;
export const COMPACT_BACKUP = { image: "squashfs-chunked", files: "files-cas" } as const;

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
    const restoreRun = stepRunner(step, { configs, prefix: "restore" });
    const backupRun = stepRunner(step, { configs, prefix: "backup" });
    const checkRun = stepRunner(step, { configs, prefix: "compaction" });
    // What the chain lies over decides the wake and the backup (a file-level chain's compaction reads only the
    // names its deltas changed: the rest is its base's index, filecas lower.go).
    // Running from the start (GET /api/compactions/:delta answers "none" until a progress record exists).
    const planning: RunProgress = { id: compactionId, kind: "backup", status: "running", strategy: "compaction", startedAt: event.timestamp.toISOString(), steps: {}, snapshotId: compactionId };
    await reportProgress(d.kv, planning);
    const chain = await checkRun.run("probe", () => planCompaction(d, p.delta)).catch(async (e) => {
      await reportProgress(d.kv, { ...planning, status: "errored", error: errorMessage(e) });
      throw e;
    });
    const kind = chain.files ? "files" : "image";
    const wake = findRestore(COMPACT_WAKE[kind])!;
    const whole = findBackup(COMPACT_BACKUP[kind])!;
    const rp: RestoreParams = { restoreId, snapshotId: p.delta, sandboxId, path: COMPACTOR_PATH, strategy: wake.name, tenant: p.tenant, replace: false, compactor: true };
    const bp: BackupParams = {
      snapshotId: compactionId, sandboxId, path: COMPACTOR_PATH, strategy: whole.name, tenant: p.tenant, compacts: p.delta,
      ...(chain.files ? { baseSnapshotId: chain.image, compactLayers: chain.deltas } : {}),
    };
    const progress: RunProgress = { id: compactionId, kind: "backup", status: "running", strategy: whole.name, startedAt: event.timestamp.toISOString(), steps: {}, snapshotId: compactionId };
    const steps = () => ({ ...Object.fromEntries(Object.entries(restoreRun.steps).map(([k, v]) => [`restore ${k}`, v])), ...Object.fromEntries(Object.entries(backupRun.steps).map(([k, v]) => [`backup ${k}`, v])), ...Object.fromEntries(Object.entries(checkRun.steps).map(([k, v]) => [`compaction ${k}`, v])) });
    // (Not reported again here: KV takes one write a second per key, and "running" is already there.)
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

/** The chain the delta resolves to: its image (or newest compaction), whether that is file-level, and the deltas over it. */
async function planCompaction(d: ReturnType<typeof depsFrom>, delta: string) {
  const t = performance.now();
  const record = await readSnapshot(d.store, d.kv, delta);
  if (!record) throw new SnapflowError("snapshot_unusable", `overlay delta ${delta} does not exist any more`);
  const { image, deltas } = await readOverlayChain(d, record);
  return { ms: Math.round(performance.now() - t), bytes: 0, image: image.id, files: image.format.kind === "files", deltas: deltas.length };
}

/** The compactor sandbox goes, its mounts (the lazy image's helper) with it. */
async function release(d: ReturnType<typeof depsFrom>, sandboxId: string) {
  await d.transport.destroy(sandboxId).catch((e) => console.warn(`compactor sandbox ${sandboxId} not destroyed: ${errorMessage(e)}`));
  return { ms: 0, bytes: 0 };
}
