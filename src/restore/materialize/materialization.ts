// The interface every materialization implements: what becomes of an archive once it is in the sandbox's staging
// file. Piped transfers extract while receiving and skip this step. index.ts gathers them by the registry's
// Materialize (overlay is a restore plan of its own: overlay-plan.ts).
import type { ArchiveFormat } from "../../../container/protocol.ts";
import type { StepResult } from "../../snapshots/records.ts";
import type { RestoreContext } from "../restore-context.ts";

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
   * For a mount whose making is costly (a lazy mount signs a URL per chunk and starts its helper): how the swap
   * moves it without redoing that. `unmount` takes down only the tree at `from`, leaving what backs it running;
   * `mountAt` makes the tree again at `to` from what still runs, or answers false when that is gone (an agent
   * restart), and the swap runs materialize again. Without it the swap undoes and materializes again.
   */
  readonly remount?: {
    unmount(c: RestoreContext, from: string): Promise<void>;
    mountAt(c: RestoreContext, to: string, format: ArchiveFormat): Promise<boolean>;
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
