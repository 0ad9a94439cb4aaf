// Hard links after `fsck.erofs --extract`. Before erofs-utils 1.7 the extractor writes every name of a hard-linked
// file as a separate copy (1.7 added "fsck: add support for extracting hard links"); Debian 12 ships 1.5. The
// image itself keeps them as one inode, so this reads the image's directory tree (erofs-dirs.ts, types from the
// inodes) and, for every inode with several names, has snapflow-lazy's `relink` make the extracted copies one file
// again. The names are the image's, so `relink` opens each one's parent beneath the staging root without following a
// symlink and links between those descriptors (native/lazy/internal/beneath): a name that leads through a symlink the
// extraction made is refused, never followed out. On an extractor that already links them there is nothing to do.
import { FT_REG_FILE, unreadable, type ErofsDirent } from "./erofs-dirs.ts";
import { runLazyTool } from "../system/lazy-tool.ts";

/** Every regular file inode with more than one name, as the names (relative, '/'-separated, walk order). */
export function erofsHardLinkGroups(entries: Iterable<ErofsDirent>, file: string): string[][] {
  const namesOf = new Map<number, string[]>();
  for (const e of entries) {
    if (e.raw.length === 0 || e.raw.includes(0x2f)) throw unreadable(file, `a directory entry named '${e.raw.toString("utf8")}'`);
    // A name that is not UTF-8 cannot be named through Node's string paths: it is left as it was extracted.
    if (e.type !== FT_REG_FILE || e.name === null || e.parent === null) continue;
    const path = e.parent ? `${e.parent}/${e.name}` : e.name;
    namesOf.set(e.nid, [...(namesOf.get(e.nid) ?? []), path]);
  }
  return [...namesOf.values()].filter((names) => names.length > 1);
}

/** Makes the extracted copies of each hard-linked inode one file again. Returns how many names were relinked. */
export async function relinkErofsHardLinks(entries: Iterable<ErofsDirent>, file: string, root: string): Promise<number> {
  const groups = erofsHardLinkGroups(entries, file);
  if (groups.length === 0) return 0;
  return (await runLazyTool<{ relinked: number }>(["relink", "--root", root], Buffer.from(JSON.stringify(groups)))).relinked;
}
