// A compaction's one check of the tree it made an image of (workflows/compact-workflow.ts). The compactor wakes the
// delta lazily and does not walk it (run-restore.ts deferCheck): the image's single pass then reads every byte
// once, hashing each file into the compaction's manifest. This check walks the tree's metadata and compares it,
// with those hashes, to what the delta's own manifest (resolved through its chain) says the tree is: the delta's
// content checked against its manifest, and the image bound to it, with one read of the tree instead of two (a
// deep verify hashed all 495 MB of the npm workspace before the image read it again: 7.5 s of a 17.9 s compaction).
import type { Deps } from "../deps.ts";
import { SnapflowError } from "../errors.ts";
import { since } from "../phases/phase-runner.ts";
import { recordContentChecked } from "../restore/content-check.ts";
import type { RestoreParams, RestoreProbeResult } from "../restore/restore-params.ts";
import { verifyTreeAgainst } from "../restore/restore-phases.ts";
import { readSnapshot } from "../snapshots/records.ts";

export async function checkCompactedTree(d: Deps, wake: RestoreParams, probed: RestoreProbeResult, compactionId: string) {
  const t = performance.now();
  const compaction = await readSnapshot(d.store, d.kv, compactionId);
  if (!compaction) throw new SnapflowError("snapshot_unusable", `compaction ${compactionId} has no record to check its tree against`);
  const m = compaction.manifest;
  const hashes = { url: await d.presigner.url(m.key, "GET"), ...(m.sha256 ? { sha256: m.sha256 } : {}) };
  const v = await verifyTreeAgainst(d, wake, probed, wake.path, { deep: true, hashes });
  // The delta's content, checked against its manifest outside the sandbox that made it (content-check.ts).
  await recordContentChecked(d, wake);
  return { ms: since(t), bytes: 0, files: v.totals.files, agentMs: v.ms, verified: { ...v.verified, by: `the tree's metadata walked and the image's own hashes (${compactionId}'s manifest, one read of every file) compared with ${wake.snapshotId}'s manifest` } };
}
