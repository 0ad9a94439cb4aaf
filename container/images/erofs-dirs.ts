// An erofs image's directory tree, read straight from the file: what erofs-names.ts checks before fsck.erofs may
// extract an image, and what erofs-links.ts relinks after it. Only directories are read (never file data), and
// mkfs.erofs never compresses them; a directory in any other layout is refused as unreadable, so a check built
// on this walk fails closed.
//
// Types come from inodes, never from the listing: fsck.erofs extracts each entry by its inode's i_mode, while a
// directory entry's file_type is only the image's own claim. An image whose entry claims a directory where the
// inode is a symlink would have the symlink's target bytes read as a directory block naming entries that lead
// through that symlink once extracted (issue 21). So every entry's inode is read, and an image whose listing
// disagrees with an inode is refused; only inodes that are directories are descended into.
//
// Read from the on-disk format (include/erofs_fs.h): the superblock at 1024, inodes at meta_blkaddr * block size
// + nid * 32 (32-byte compact or 64-byte extended), directory data plain (layout 0) or with the last block inline
// after the inode and its xattrs (layout 2), each block an array of 12-byte dirents followed by their names.
import { open, type FileHandle } from "node:fs/promises";
import { AgentError } from "../http/agent-error.ts";

const EROFS_MAGIC = 0xe0f5e1e2;
const SUPER_OFFSET = 1024;
const DIRENT_SIZE = 12;
export const FT_REG_FILE = 1;
export const FT_DIR = 2;
/** S_IFMT of i_mode → the dirent file_type it must be listed with (include/erofs_fs.h, as in the kernel's fs_ftype). */
const FT_OF_IFMT: Record<number, number> = { 0o100000: 1, 0o040000: 2, 0o020000: 3, 0o060000: 4, 0o010000: 5, 0o140000: 6, 0o120000: 7 };
const S_IFMT = 0o170000;
const TYPE_NAME: Record<number, string> = { 1: "a file", 2: "a directory", 3: "a character device", 4: "a block device", 5: "a FIFO", 6: "a socket", 7: "a symlink" };
const LAYOUT_FLAT_PLAIN = 0;
const LAYOUT_FLAT_INLINE = 2;

interface Superblock {
  blockSize: number;
  rootNid: number;
  metaBlkaddr: number;
}

interface Inode {
  pos: number;
  /** i_mode: the type and permission bits, as an extractor uses them */
  mode: number;
  headerSize: number;
  layout: number;
  size: number;
  rawBlkaddr: number;
}

/** One directory entry as the image stores it; "." and ".." are not reported. */
export interface ErofsDirent {
  /** the directory holding it, relative to the root ('' for the root), '/'-separated; null below a name that is not UTF-8 */
  parent: string | null;
  /** the inode of the directory holding it */
  dirNid: number;
  nid: number;
  /** the file type of the entry's inode (FT_*), which its listing was checked to agree with */
  type: number;
  /** the inode's i_mode */
  mode: number;
  /**
   * The name's bytes as an extractor uses them: up to the first NUL (fsck.erofs copies the stored length and
   * then treats the name as a C string), so a check of these bytes is a check of what would be written.
   */
  raw: Buffer;
  /** the name as a string, or null when it is not UTF-8 (Node's string paths cannot name it) */
  name: string | null;
}

export function unreadable(file: string, what: string): AgentError {
  return new AgentError("tool_failed", `reading the erofs image ${file}'s directories: ${what}`);
}

async function readAt(fh: FileHandle, pos: number, length: number): Promise<Buffer> {
  const buf = Buffer.alloc(length);
  const { bytesRead } = await fh.read(buf, 0, length, pos);
  return buf.subarray(0, bytesRead);
}

async function readSuperblock(fh: FileHandle, file: string): Promise<Superblock> {
  const sb = await readAt(fh, SUPER_OFFSET, 128);
  if (sb.length < 128 || sb.readUInt32LE(0) !== EROFS_MAGIC) throw unreadable(file, "no erofs superblock");
  const blkszbits = sb.readUInt8(12);
  if (blkszbits < 9 || blkszbits > 16) throw unreadable(file, `block size 2^${blkszbits}`);
  return { blockSize: 1 << blkszbits, rootNid: sb.readUInt16LE(14), metaBlkaddr: sb.readUInt32LE(40) };
}

async function readInode(fh: FileHandle, sb: Superblock, nid: number, file: string): Promise<Inode> {
  if (!Number.isSafeInteger(nid)) throw unreadable(file, `inode ${nid} is past the end`);
  const pos = sb.metaBlkaddr * sb.blockSize + nid * 32;
  const raw = await readAt(fh, pos, 64);
  if (raw.length < 32) throw unreadable(file, `inode ${nid} is past the end`);
  const format = raw.readUInt16LE(0);
  const extended = (format & 1) === 1;
  const xattrCount = raw.readUInt16LE(2);
  const xattrSize = xattrCount === 0 ? 0 : 12 + (xattrCount - 1) * 4;
  const size = extended ? Number(raw.readBigUInt64LE(8)) : raw.readUInt32LE(8);
  return { pos, mode: raw.readUInt16LE(4), headerSize: (extended ? 64 : 32) + xattrSize, layout: (format >> 1) & 7, size, rawBlkaddr: raw.readUInt32LE(16) };
}

/** A directory's data, block by block (each block holds whole dirents and their names). */
async function* dirBlocks(fh: FileHandle, sb: Superblock, inode: Inode, file: string): AsyncGenerator<Buffer> {
  if (inode.layout !== LAYOUT_FLAT_PLAIN && inode.layout !== LAYOUT_FLAT_INLINE) {
    throw unreadable(file, `a directory with data layout ${inode.layout} (only plain and inline are read)`);
  }
  const blocks = Math.ceil(inode.size / sb.blockSize);
  for (let i = 0; i < blocks; i++) {
    const length = Math.min(sb.blockSize, inode.size - i * sb.blockSize);
    const inline = inode.layout === LAYOUT_FLAT_INLINE && i === blocks - 1;
    const pos = inline ? inode.pos + inode.headerSize : (inode.rawBlkaddr + i) * sb.blockSize;
    yield await readAt(fh, pos, length);
  }
}

function parseDirBlock(block: Buffer, file: string): { nid: number; type: number; raw: Buffer }[] {
  if (block.length < DIRENT_SIZE) return [];
  const count = block.readUInt16LE(8) / DIRENT_SIZE;
  if (!Number.isInteger(count) || count < 1 || count * DIRENT_SIZE > block.length) throw unreadable(file, "a malformed directory block");
  const entries: { nid: number; type: number; raw: Buffer }[] = [];
  for (let i = 0; i < count; i++) {
    const at = i * DIRENT_SIZE;
    const start = block.readUInt16LE(at + 8);
    const end = i + 1 < count ? block.readUInt16LE(at + DIRENT_SIZE + 8) : block.length;
    if (start > end || end > block.length) throw unreadable(file, "a directory entry's name lies outside its block");
    let raw = block.subarray(start, end);
    // The last name of a block runs to the block's end or to NUL padding; any name ends at its first NUL.
    const nul = raw.indexOf(0);
    if (nul >= 0) raw = raw.subarray(0, nul);
    entries.push({ nid: Number(block.readBigUInt64LE(at)), type: block.readUInt8(at + 10), raw });
  }
  return entries;
}

const isDotOrDotDot = (raw: Buffer) => (raw.length === 1 && raw[0] === 0x2e) || (raw.length === 2 && raw[0] === 0x2e && raw[1] === 0x2e);

/** Refuses an image whose listing names an entry as one type while its inode is another (see the file comment). */
function lyingEntry(file: string, where: string, raw: Buffer, listed: number, inode: number): AgentError {
  const name = JSON.stringify(raw.toString("utf8"));
  const what = (t: number) => TYPE_NAME[t] ?? `file type ${t}`;
  return new AgentError(
    "path_outside_root",
    `archive: the erofs image lists ${name} in ${where} as ${what(listed)} but its inode is ${what(inode)}; an image whose listing disagrees with its inodes is refused before anything is extracted`,
    "archive",
  );
}

/**
 * Every entry of every directory below the root, depth first, each typed by its own inode (checked against its
 * listing). A directory reached twice (a loop) is refused.
 */
export async function* erofsEntries(file: string): AsyncGenerator<ErofsDirent> {
  const fh = await open(file, "r");
  try {
    const sb = await readSuperblock(fh, file);
    const seenDirs = new Set<number>();
    const stack: { nid: number; rel: string | null }[] = [{ nid: sb.rootNid, rel: "" }];
    while (stack.length) {
      const { nid, rel } = stack.pop()!;
      if (seenDirs.has(nid)) throw unreadable(file, `directory inode ${nid} is reached twice`);
      seenDirs.add(nid);
      const inode = await readInode(fh, sb, nid, file);
      if ((inode.mode & S_IFMT) !== 0o040000) throw unreadable(file, `inode ${nid} is read as a directory but is not one`);
      const where = rel === null ? "a directory whose name is not UTF-8" : rel ? `/${rel}` : "the image's root";
      for await (const block of dirBlocks(fh, sb, inode, file)) {
        for (const e of parseDirBlock(block, file)) {
          if (isDotOrDotDot(e.raw)) continue;
          const mode = (await readInode(fh, sb, e.nid, file)).mode;
          const type = FT_OF_IFMT[mode & S_IFMT];
          if (type === undefined || type !== e.type) throw lyingEntry(file, where, e.raw, e.type, type ?? 0);
          const decoded = e.raw.toString("utf8");
          const name = Buffer.from(decoded, "utf8").equals(e.raw) ? decoded : null;
          yield { parent: rel, dirNid: nid, nid: e.nid, type, mode, raw: e.raw, name };
          if (type === FT_DIR) stack.push({ nid: e.nid, rel: rel === null || name === null ? null : rel ? `${rel}/${name}` : name });
        }
      }
    }
  } finally {
    await fh.close();
  }
}

/**
 * The whole tree, read once: a restore checks the names, relinks and sets set-id bits from the same entries rather
 * than reading every directory and inode of the image three times.
 */
export async function readErofsTree(file: string): Promise<ErofsDirent[]> {
  const entries: ErofsDirent[] = [];
  for await (const e of erofsEntries(file)) entries.push(e);
  return entries;
}

/**
 * Regular files whose inode has setuid or setgid, with their mode (relative paths, '/'-separated). i_mode sits at
 * byte 4 of both the compact and the extended inode. For a restore that keeps owners: fsck.erofs 1.5 sets an
 * entry's mode before its owner, and the kernel clears these bits on chown, so they are set again from here.
 */
export function erofsSetidFiles(entries: Iterable<ErofsDirent>): { path: string; mode: number }[] {
  const out: { path: string; mode: number }[] = [];
  for (const e of entries) {
    if (e.type !== FT_REG_FILE || e.name === null || e.parent === null) continue;
    if (e.mode & 0o6000) out.push({ path: e.parent ? `${e.parent}/${e.name}` : e.name, mode: e.mode & 0o7777 });
  }
  return out;
}
