// Hard links after `fsck.erofs --extract`. Before erofs-utils 1.7 the extractor writes every name of a hard-linked
// file as a separate copy (1.7 added "fsck: add support for extracting hard links"); Debian 12 ships 1.5. The
// image itself keeps them as one inode, so this reads the image's directory tree (erofs-dirs.ts) and, for every
// inode with several names, makes the extracted copies one file again. On an extractor that already links them
// there is nothing to do.
import { lstat, link, realpath, rename, stat, utimes } from "node:fs/promises";
import { randomBytes } from "node:crypto";
import { dirname, join } from "node:path";
import { AgentError } from "./agent-error.ts";
import { erofsEntries, FT_REG_FILE, unreadable } from "./erofs-dirs.ts";

/** Every regular file inode with more than one name, as the names (relative, '/'-separated, walk order). */
export async function erofsHardLinkGroups(file: string): Promise<string[][]> {
  const namesOf = new Map<number, string[]>();
  for await (const e of erofsEntries(file)) {
    if (e.raw.length === 0 || e.raw.includes(0x2f)) throw unreadable(file, `a directory entry named '${e.raw.toString("utf8")}'`);
    // A name that is not UTF-8 cannot be named through Node's string paths: it is left as it was extracted.
    if (e.type !== FT_REG_FILE || e.name === null || e.parent === null) continue;
    const path = e.parent ? `${e.parent}/${e.name}` : e.name;
    namesOf.set(e.nid, [...(namesOf.get(e.nid) ?? []), path]);
  }
  return [...namesOf.values()].filter((names) => names.length > 1);
}

/** Replaces `other` with a hard link to `first`, keeping the parent directory's times (which the link changes). */
async function relinkOne(root: string, realRoot: string, first: string, other: string): Promise<boolean> {
  const a = join(root, first);
  const b = join(root, other);
  const [sa, sb] = await Promise.all([lstat(a), lstat(b)]);
  if (sa.dev === sb.dev && sa.ino === sb.ino) return false;
  if (!sa.isFile() || !sb.isFile() || sa.size !== sb.size) {
    throw new AgentError("tool_failed", `erofs hard links: '${first}' and '${other}' are one inode in the image but differ after extraction`);
  }
  const parent = dirname(b);
  const realParent = await realpath(parent);
  if (realParent !== realRoot && !realParent.startsWith(realRoot + "/")) throw new AgentError("tool_failed", `erofs hard links: '${other}' leads out of the extracted tree`);
  const times = await stat(parent);
  const temp = join(parent, `.snapflow-link-${randomBytes(6).toString("hex")}`);
  await link(a, temp);
  await rename(temp, b);
  await utimes(parent, times.atime, times.mtime);
  return true;
}

/** Makes the extracted copies of each hard-linked inode one file again. Returns how many names were relinked. */
export async function relinkErofsHardLinks(file: string, root: string): Promise<number> {
  const groups = await erofsHardLinkGroups(file);
  if (groups.length === 0) return 0;
  const realRoot = await realpath(root);
  let relinked = 0;
  for (const [first, ...others] of groups) {
    for (const other of others) if (await relinkOne(root, realRoot, first!, other)) relinked++;
  }
  return relinked;
}
