// Removing a delta's deleted entries without deleting through a symlink. `rm(join(dir, "a/b"))` resolves `a`:
// if an earlier layer (or the sandbox's own code) made `a -> /elsewhere`, the delete lands there. snapflow-lazy's
// `remove` (native/lazy/internal/beneath) opens each entry's parent with openat2(RESOLVE_BENEATH|
// RESOLVE_NO_SYMLINKS) (O_NOFOLLOW per component on kernels without it) and removes the last component relative to
// that descriptor, so no component is followed, not even one swapped for a symlink while the list is applied. A
// symlink or non-directory on the way means the entry cannot be below `dir` as named: nothing of ours to remove
// (skipped, reported). Names with '..', absolute names and NULs refuse the whole list here, naming the entry.
import { AgentError } from "../http/agent-error.ts";
import { runLazyTool } from "../system/lazy-tool.ts";

export interface Removal {
  removed: number;
  /** entries not removed because a component on their way is a symlink or not a directory */
  skipped: string[];
}

export async function removeEntriesSafely(dir: string, entries: string[]): Promise<Removal> {
  for (const [i, rel] of entries.entries()) {
    if (rel === "" || rel.startsWith("/") || rel.split("/").includes("..") || rel.includes("\0")) {
      throw new AgentError("path_outside_root", `entries.${i} must be a relative path inside the tree, got '${rel}'`, `entries.${i}`);
    }
  }
  if (!entries.length) return { removed: 0, skipped: [] };
  // NUL-separated on stdin: a deletion list can be tens of thousands of names holding any byte but NUL.
  return runLazyTool<Removal>(["remove", "--root", dir], Buffer.from(entries.map((e) => `${e}\0`).join("")));
}
