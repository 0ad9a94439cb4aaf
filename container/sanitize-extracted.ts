// What a restore must not plant, whoever made the archive: device nodes (a char or block device in a sandbox's
// tree is a door to the host's hardware), setuid/setgid bits (a root-owned setuid binary is a privilege
// escalation waiting for its first exec) and owners the archive chose (a file handed to another user of the
// sandbox). Run on a freshly extracted layer, in its staging directory (mode 0700: nobody but root reaches it
// meanwhile), before it joins the target. The extractors run as root keep the archive's owners and bits (tar's and
// fsck.erofs's default as root; unsquashfs has no switch against it), so every entry not owned by the agent's own
// user is given back to it here (lchown: a symlink itself, never its target) and the bits cleared, unless the
// restore asked to keep them (`keepOwnership`); devices go either way. Directories keep setgid (group
// inheritance, harmless); overlay whiteouts (char 0/0) stay, they are an overlay delta's deletions.
import { chmod, lchown, lstat, readdir, rm } from "node:fs/promises";
import { join } from "node:path";

export interface Sanitized {
  devicesRemoved: string[];
  setidCleared: string[];
  /** entries whose owner or group was not the agent's, given back to it */
  ownersReset: number;
}

const self = { uid: process.getuid?.() ?? -1, gid: process.getgid?.() ?? -1 };

export async function sanitizeExtracted(dir: string, options: { keepOwnership?: boolean } = {}, rel = "", out: Sanitized = { devicesRemoved: [], setidCleared: [], ownersReset: 0 }): Promise<Sanitized> {
  for (const name of await readdir(dir)) {
    const path = join(dir, name);
    const shown = rel ? `${rel}/${name}` : name;
    const st = await lstat(path);
    // A char device 0/0 is an overlay whiteout (how an overlay delta records a deletion): no device behind it.
    const whiteout = st.isCharacterDevice() && st.rdev === 0;
    if ((st.isCharacterDevice() || st.isBlockDevice()) && !whiteout) {
      await rm(path, { force: true });
      out.devicesRemoved.push(shown);
      continue;
    }
    if (!options.keepOwnership && self.uid >= 0 && (st.uid !== self.uid || st.gid !== self.gid)) {
      await lchown(path, self.uid, self.gid);
      out.ownersReset++;
    }
    if (st.isDirectory()) {
      await sanitizeExtracted(path, options, shown, out);
    } else if (!options.keepOwnership && st.isFile() && st.mode & 0o6000) {
      // chown above may already have cleared them (the kernel does for non-directories); say so either way.
      await chmod(path, st.mode & 0o1777);
      out.setidCleared.push(shown);
    }
  }
  return out;
}
