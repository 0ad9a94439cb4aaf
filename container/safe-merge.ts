// Moving an extracted layer into the restore target without ever resolving a symlink in the target. GNU tar
// refuses absolute names, '..' and links out *within* one archive, but follows a symlink already on disk: a delta
// layer holding `x/evil` writes through a base's `x -> /outside` (tried with tar 1.34: exit 0). So every layer
// is extracted into an empty staging directory (nothing on disk to follow), cleaned (sanitize), and merged here:
// the walk goes down the target with lstat, enters only real directories, and replaces whatever else is in the
// way (a symlink is replaced, never followed) — the component-wise walk that openat2(RESOLVE_BENEATH) would give.
import { lstat, readdir, rename, rm, utimes, chmod } from "node:fs/promises";
import { join } from "node:path";

/**
 * A directory tar made itself has a fresh, sub-second mtime (the kernel's clock, which may lag Date.now() a
 * little); one from the archive has whole seconds (tar keeps seconds) from before the extraction.
 */
const madeOnTheWay = (mtimeMs: number, extractedAtMs: number) => mtimeMs >= extractedAtMs - 1000 && mtimeMs % 1000 !== 0;

/**
 * Moves everything in `staging` into `target` (both real directories); answers the entries moved. `extractedAtMs`:
 * when extraction began. A staged directory with an mtime after it was made by tar on the way to an entry (a
 * delta layer holds `a/b`, not `a`): the target's directory keeps its own mode and times, as with tar straight into
 * the tree. One with an older mtime was an archive entry: it takes the archive's mode and times.
 */
export async function mergeInto(staging: string, target: string, extractedAtMs: number): Promise<number> {
  let moved = 0;
  for (const name of await readdir(staging)) {
    const from = join(staging, name);
    const to = join(target, name);
    const src = await lstat(from);
    const dst = await lstat(to).catch(() => null);
    if (src.isDirectory() && dst?.isDirectory()) {
      // Both real directories (lstat: a symlink to a directory is not one): go down, then set the directory's
      // mode and times: the archive's, or back to its own when tar only made it on the way.
      moved += await mergeInto(from, to, extractedAtMs);
      const attrs = madeOnTheWay(src.mtimeMs, extractedAtMs) ? dst : src;
      await chmod(to, attrs.mode & 0o7777);
      await utimes(to, attrs.atime, attrs.mtime);
      continue;
    }
    // Anything else in the way (a file, a symlink, a directory the layer replaces with a non-directory) goes:
    // rm does not follow symlinks, and rename replaces the name itself.
    if (dst) await rm(to, { recursive: true, force: true });
    await rename(from, to);
    moved++;
  }
  return moved;
}
