// The interface every materialization implements: what becomes of an archive once it is in the sandbox's staging
// file. Piped transfers extract while receiving and skip this step. index.ts gathers them by the registry's
// Materialize (overlay is a restore plan of its own: overlay-plan.ts).
import type { z } from "zod";
import type { ArchiveFormat, SwapMount } from "../../../container/contract/protocol.ts";
import type { StepResult } from "../../snapshots/records.ts";
import type { RestoreContext } from "../restore-context.ts";
import type { RestoreProbeResult } from "../restore-params.ts";

export interface Materialization {
  /**
   * Makes the tree at `dir` (the restore's staged place beside the target: restore-params.ts `swap`) from the staged
   * archive of `format`; `dir` is empty or missing when it is called. `expected`: the snapshot's manifest, for
   * extractors that check entries as they stream (tar).
   */
  materialize(c: RestoreContext, staged: string, format: ArchiveFormat, expected: { url: string }, dir: string): Promise<StepResult>;
  /** Takes down what materialize made at `dir` that deleting it cannot (a mount); safe to call when nothing is there. */
  undo(c: RestoreContext, dir: string): Promise<void>;
  /** true: the tree is a mount of the archive, which a rename cannot move: the swap makes it again at the target */
  readonly mounts: boolean;
  /**
   * What it keeps on the sandbox's disk, for the restore's space check (space-check.ts): "tree", the restored files
   * beside the target (and, on a staged path, the archive until it is extracted); "image", the archive itself, kept
   * under the images area for as long as it is mounted (no tree is written).
   */
  readonly keeps: "tree" | "image";
  /**
   * true: the tree is the stored image served as it is, without a whole-image hash (a lazy mount: each chunk checked
   * against an index the record vouches for before any byte of it is read): as for a mounted image whose SHA-256 was
   * checked, verify does not walk it once its content was checked against the manifest (restore-phases.ts).
   */
  readonly servesImage?: true;
  /**
   * For a tree whose making is costly (a lazy mount signs URLs and starts its helper): materialize starts what backs
   * it and leaves `dir` empty, and the swap makes the tree once, at the target: the agent's swap mounts `mount` there
   * over what still runs, in the same call (a 404 when that is gone, after an agent restart: the swap then
   * materializes again). Repeatable: a tree already at the target is kept; materialize clears what an earlier attempt
   * left (undo) itself, while it prepares. The tree's check then runs at the target (afterSwap). Without it a mount is made beside the target, checked there, and made again at the target by the swap.
   */
  readonly atTarget?: {
    mount(c: RestoreContext, format: ArchiveFormat): z.input<typeof SwapMount>;
    /** Whether this restore may make its tree at the target before its check (absent: always); else as without atTarget. */
    when?(probed: RestoreProbeResult): boolean;
    /** What materialize does instead of `materialize` when nothing need run before the swap's mount (absent: materialize). */
    prepare?(c: RestoreContext, format: ArchiveFormat, probed: RestoreProbeResult): StepResult;
    /** The error to fail with when the swap's mount failed with `e` (a lazy mount names the chunks it could not have). */
    failed?(c: RestoreContext, e: unknown): Promise<unknown>;
  };
  /**
   * Wraps the verify step's tree check when materialize left work running in the background (a lazy mount's
   * prefetch): explains a failed check, and waits for that work before the restore counts as done.
   */
  verify?(c: RestoreContext, check: () => Promise<StepResult>): Promise<StepResult>;
  /**
   * Work left running once the tree is at the target (a lazy mount's prefetch): wait for it before the restore counts
   * as done. Called by verify right after the swap; a failure fails the restore, whose cleanup rolls the swap back.
   */
  afterSwap?(c: RestoreContext, check: (path: string) => Promise<StepResult>): Promise<Record<string, unknown>>;
}
