// What a restore must not plant, whoever made the archive: device nodes (a char or block device in a sandbox's
// tree is a door to the host's hardware) and setuid/setgid bits (a root-owned setuid binary is a privilege
// escalation waiting for its first exec). Run on a freshly extracted layer before it joins the target; owners are
// not restored in the first place (tar --no-same-owner). Directories keep setgid (group inheritance, harmless);
// overlay whiteouts (char 0/0) stay, they are an overlay delta's deletions.
import { chmod, lstat, readdir, rm } from "node:fs/promises";
import { join } from "node:path";

export interface Sanitized {
  devicesRemoved: string[];
  setidCleared: string[];
}

export async function sanitizeExtracted(dir: string, rel = "", out: Sanitized = { devicesRemoved: [], setidCleared: [] }): Promise<Sanitized> {
  for (const name of await readdir(dir)) {
    const path = join(dir, name);
    const shown = rel ? `${rel}/${name}` : name;
    const st = await lstat(path);
    // A char device 0/0 is an overlay whiteout (how an overlay delta records a deletion): no device behind it.
    const whiteout = st.isCharacterDevice() && st.rdev === 0;
    if ((st.isCharacterDevice() || st.isBlockDevice()) && !whiteout) {
      await rm(path, { force: true });
      out.devicesRemoved.push(shown);
    } else if (st.isDirectory()) {
      await sanitizeExtracted(path, shown, out);
    } else if (st.isFile() && st.mode & 0o6000) {
      await chmod(path, st.mode & 0o1777);
      out.setidCleared.push(shown);
    }
  }
  return out;
}
