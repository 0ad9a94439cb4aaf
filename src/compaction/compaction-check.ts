// A compaction's one check of the tree it made a snapshot of (workflows/compact-workflow.ts). The compactor wakes the
// delta lazily and does not walk it (run-restore.ts deferCheck): the backup's single pass then walks the tree once,
// hashing each file it reads (a file-level compaction takes the rest from its base's index: filecas lower.go) into
// the compaction's manifest. This check compares that manifest — the pass's walk, made moments ago in this
// compactor sandbox of ours, of a tree nothing writes to — with what the delta's own manifest (resolved through its
// chain) says the tree is: the delta's content checked against its manifest and the snapshot bound to it, without
// reading the tree again (a deep verify hashed all 495 MB of the npm workspace before the image read it again: 7.5 s
// of a 17.9 s compaction; a second metadata walk through overlayfs and FUSE, ~1 s).
import type { Deps } from "../deps.ts";
import { SnapflowError } from "../errors.ts";
import { since } from "../phases/phase-runner.ts";
import { recordContentChecked } from "../restore/content-check.ts";
import type { RestoreParams, RestoreProbeResult } from "../restore/restore-params.ts";
import { verifyTreeAgainst } from "../restore/restore-phases.ts";
import { manifestSource } from "../snapshots/manifest-source.ts";
import { readSnapshot } from "../snapshots/records.ts";

export async function checkCompactedTree(d: Deps, wake: RestoreParams, probed: RestoreProbeResult, compactionId: string) {
  const t = performance.now();
  const compaction = await readSnapshot(d.store, d.kv, compactionId);
  if (!compaction) throw new SnapflowError("snapshot_unusable", `compaction ${compactionId} has no record to check its tree against`);
  const m = compaction.manifest;
  // A file-level compaction's manifest is made from its index (manifest-source.ts).
  const hashes = await manifestSource(d.presigner, m);
  const v = await verifyTreeAgainst(d, wake, probed, wake.path, { deep: true, hashes, walk: false });
  // The delta's content, checked against its manifest outside the sandbox that made it (content-check.ts).
  await recordContentChecked(d, wake);
  return { ms: since(t), bytes: 0, files: v.totals.files, agentMs: v.ms, verified: { ...v.verified, by: `${compactionId}'s manifest (its single pass: one walk of the tree, every file it read hashed) compared with ${wake.snapshotId}'s manifest` } };
}
