// Checks an erofs image's names before fsck.erofs extracts it. fsck.erofs 1.5 (Debian 12) joins each stored name
// onto the extraction path as it is: a name holding '/' such as `../../../outside/x` is written outside the
// directory it was told to extract into (tried: exit 0, the file lands outside). A staging directory cannot stop
// that, the tool itself walks out. So the image's own directory tree is read first (erofs-dirs.ts) and an image
// is refused, before any byte is written, when a name is empty or holds '/', or when one directory names an entry
// twice (a symlink and a directory under one name: what symlink-then-file needs in an image). A directory the
// reader cannot read (a layout mkfs.erofs does not write) refuses the image too.
import { AgentError } from "../http/agent-error.ts";
import type { ErofsDirent } from "./erofs-dirs.ts";

/** Printable: a hostile name may hold control bytes; JSON escapes them. */
const shown = (raw: Buffer) => JSON.stringify(raw.toString("utf8"));

/** Throws path_outside_root (400, field `field`) naming the first entry that extraction could not keep inside. */
export function checkErofsNames(tree: Iterable<ErofsDirent>, field: string): { entries: number } {
  const seen = new Set<string>();
  let entries = 0;
  for (const e of tree) {
    entries++;
    const where = e.parent === null ? "a directory whose name is not UTF-8" : e.parent ? `/${e.parent}` : "the image's root";
    if (e.raw.length === 0 || e.raw.includes(0x2f)) {
      throw new AgentError("path_outside_root", `${field}: the erofs image names an entry ${shown(e.raw)} in ${where}; a name holding '/' (or none) would be extracted outside the restore target, so the image is refused`, field);
    }
    const key = `${e.dirNid}\0${e.raw.toString("latin1")}`;
    if (seen.has(key)) {
      throw new AgentError("path_outside_root", `${field}: the erofs image names ${shown(e.raw)} twice in ${where}; a second entry under one name could be written through the first (a symlink), so the image is refused`, field);
    }
    seen.add(key);
  }
  return { entries };
}

/**
 * mkfs.erofs 1.5 (Debian 12) fails on a 255-byte name, the longest Linux allows, with "Could not format the device:
 * No such file or directory" (254 bytes work; tried). Refuse such a backup up front, naming the entry, rather than
 * fail in the tool with words that name nothing.
 */
export function refuseErofsLongNames(entries: { path: string }[]): void {
  const long = entries.find((e) => Buffer.byteLength(e.path.slice(e.path.lastIndexOf("/") + 1)) >= 255);
  if (long) throw new AgentError("bad_request", `path: ${JSON.stringify(long.path)} has a 255-byte name, which mkfs.erofs 1.5 cannot store; use a squashfs or tar strategy for this tree, or rename it`, "path");
}
