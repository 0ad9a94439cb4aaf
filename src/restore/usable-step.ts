// Which step of a restore made its tree usable at the target before verify: the transfer when it swapped the tree in
// (a tree made at the target — a lazy mount over its index, a trusted image — or a file-level wake's overlay: no
// materialize step follows then, run-restore.ts), else materialize (a fork's lazy base; for the others, the step that
// made the tree beside the target). Its `usableMs`, `swappedIn` and the mount's parts are what benches and the CLI show.
export function usableStep<S extends object>(steps: Record<string, S | undefined>): S | undefined {
  return swappedInByTransfer(steps) ? steps.transfer : steps.materialize;
}

/** Did the transfer swap the tree in (so that no materialize step ran)? */
export const swappedInByTransfer = (steps: Record<string, object | undefined>): boolean => (steps.transfer as { swappedIn?: unknown } | undefined)?.swappedIn === true;
