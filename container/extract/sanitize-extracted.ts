// What a restore must not plant, whoever made the archive: device nodes (a char or block device in a sandbox's
// tree is a door to the host's hardware), setuid/setgid bits (a root-owned setuid binary is a privilege
// escalation waiting for its first exec) and owners the archive chose (a file handed to another user of the
// sandbox). Run on a freshly extracted layer, in its staging directory (mode 0700: nobody but root reaches it
// meanwhile), before it joins the target. The extractors run as root keep the archive's owners and bits (tar's and
// fsck.erofs's default as root; unsquashfs has no switch against it), so every entry not owned by the agent's own
// user is given back to it and the bits cleared, unless the restore asked to keep them (`keepOwnership`); devices go
// either way. Directories keep setgid (group inheritance, harmless); overlay whiteouts (char 0/0) stay, they are an
// overlay delta's deletions.
//
// The walk is snapflow-lazy's `sanitize` (native/lazy/internal/beneath): each directory held by a descriptor opened
// from its parent with O_NOFOLLOW, every change made relative to it (fchownat without following, fchmod on a file
// opened O_NOFOLLOW), so a symlink the archive planted, or one swapped in meanwhile, never carries a change outside.
import { runLazyTool } from "../system/lazy-tool.ts";

export interface Sanitized {
  devicesRemoved: string[];
  setidCleared: string[];
  /** entries whose owner or group was not the agent's, given back to it */
  ownersReset: number;
}

export function sanitizeExtracted(dir: string, options: { keepOwnership?: boolean } = {}): Promise<Sanitized> {
  return runLazyTool<Sanitized>(["sanitize", "--root", dir, ...(options.keepOwnership ? ["--keep-owners"] : [])]);
}
