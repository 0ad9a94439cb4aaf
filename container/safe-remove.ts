// Removing a delta's deleted entries without deleting through a symlink. `rm(join(dir, "a/b"))` resolves `a`:
// if an earlier layer (or the sandbox's own code) made `a -> /elsewhere`, the delete lands there. Here each
// component below `dir` is lstat'ed in turn; a symlink or non-directory on the way means the entry cannot be
// below `dir` as named, so there is nothing of ours to remove (skipped, reported). The last component is removed
// itself (rm never follows a symlink it removes). Names with '..', absolute names and NULs are refused outright.
import { lstat, rm } from "node:fs/promises";
import { join } from "node:path";
import { AgentError } from "./agent-error.ts";

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
  const out: Removal = { removed: 0, skipped: [] };
  for (const rel of entries) {
    const parts = rel.split("/").filter((p) => p !== "" && p !== ".");
    let parent = dir;
    let safe = true;
    for (const part of parts.slice(0, -1)) {
      parent = join(parent, part);
      const st = await lstat(parent).catch(() => null);
      if (!st?.isDirectory()) {
        safe = false;
        break;
      }
    }
    if (!safe || parts.length === 0) {
      out.skipped.push(rel);
      continue;
    }
    await rm(join(parent, parts.at(-1)!), { recursive: true, force: true });
    out.removed++;
  }
  return out;
}
