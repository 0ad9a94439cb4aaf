// Moving an extracted layer into the restore target without ever resolving a symlink in the target. GNU tar
// refuses absolute names, '..' and links out *within* one archive, but follows a symlink already on disk: a delta
// layer holding `x/evil` writes through a base's `x -> /outside` (tried with tar 1.34: exit 0). So every layer
// is extracted into an empty staging directory (nothing on disk to follow), cleaned (sanitize), and merged here.
//
// The merge is snapflow-lazy's `merge` (native/lazy/internal/beneath): it walks staging and target by directory
// descriptors, each opened from its parent with O_NOFOLLOW, enters only real directories, and replaces whatever
// else is in the way (a symlink is replaced, never followed). Node has no openat/openat2, and a walk by path
// names (lstat, then act on the name) leaves a gap between check and use in which code running in the target
// could swap a checked directory for a symlink to outside; a held descriptor cannot be swapped.
import { runLazyTool } from "../system/lazy-tool.ts";

/**
 * Moves everything in `staging` into `target` (both real directories); answers the entries moved. `extractedAtMs`:
 * when extraction began. A staged directory with an mtime after it was made by tar on the way to an entry (a
 * delta layer holds `a/b`, not `a`): the target's directory keeps its own mode and times, as with tar straight into
 * the tree. One with an older mtime was an archive entry: it takes the archive's mode and times, and with
 * `keepOwnership` its owner.
 */
export async function mergeInto(staging: string, target: string, extractedAtMs: number, options: { keepOwnership?: boolean } = {}): Promise<number> {
  const args = ["merge", "--staging", staging, "--target", target, "--extracted-at", String(Math.floor(extractedAtMs)), ...(options.keepOwnership ? ["--keep-owners"] : [])];
  return (await runLazyTool<{ moved: number }>(args)).moved;
}
