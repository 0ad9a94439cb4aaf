// A restore plan: how the probe, transfer, materialize and cleanup phases go for one kind of restore. Two plans
// exist — an archive (tar or image, deltas included) brought by a transfer path and materialized, or the overlay
// (a squashfuse base under a writable overlayfs) — and the strategy chooses one, once (plans.ts planOf).
import type { StepResult } from "../snapshots/records.ts";
import type { SnapshotRecord } from "../snapshots/records.ts";
import type { RestoreContext } from "./restore-context.ts";
import type { RestoreProbeResult } from "./restore-params.ts";
import type { RestoreStrategy } from "../strategies/registry.ts";

export interface RestorePlan {
  /**
   * What the restore keeps on the sandbox's disk, for its space check (space-check.ts): "tree", the restored files
   * (and a staged archive, unless piped); "image", an image mounted from the images area; "overlay", a base image and
   * the layers of an overlay under the images area.
   */
  keeps(s: RestoreStrategy): "tree" | "image" | "overlay";
  /**
   * Whether the tree it makes is the stored image served as it is, whose SHA-256 was checked on arrival (or a
   * file-level index served as it is, under an empty upper: "index"): verify then need not walk it (restore-phases.ts).
   */
  servesCheckedImage(s: RestoreStrategy, probed?: Pick<RestoreProbeResult, "layers">): boolean | "index";
  /** Checks the snapshot fits, the sandbox can run the strategy and the target may be written; lists the layers. */
  probe(c: RestoreContext, snapshot: SnapshotRecord): Promise<Pick<RestoreProbeResult, "snapshot" | "layers">>;
  transfer(c: RestoreContext, probed: RestoreProbeResult): Promise<StepResult>;
  materialize(c: RestoreContext, probed: RestoreProbeResult): Promise<StepResult>;
  /**
   * Puts the verified tree, built at probed.swap.staged, at the target (the agent's swap keeps the old tree beside
   * it); a tree that is a mount is taken down at the staged place and made again at the target. Repeatable.
   * Answers `remounted`: the tree made at the target over what still ran, or from scratch; `mountAtMs`: the mount at
   * the target, when the swap made it (a lazy mount's image or overlay).
   */
  swapIn(c: RestoreContext, probed: RestoreProbeResult): Promise<{ ms: number; hadTarget: boolean; remounted?: "over what still ran" | "from scratch"; mountAtMs?: number }>;
  /**
   * After a failure past the probe: take down the run's own mounts (at the staged place, or at the target after a
   * swap) and remove its staging files, so that the agent's rollback can put the old tree back. Idempotent.
   */
  cleanup(c: RestoreContext, probed: RestoreProbeResult): Promise<void>;
  /** Wraps verify's tree check when the plan left work running in the background (materialization.ts verify). */
  verify?(c: RestoreContext, probed: RestoreProbeResult, check: () => Promise<StepResult>): Promise<StepResult>;
  /** Waits for work the materialization left running once the tree is at the target (materialization.ts afterSwap). */
  afterSwap?(c: RestoreContext, probed: RestoreProbeResult, check: (path: string) => Promise<StepResult>): Promise<Record<string, unknown>>;
}
