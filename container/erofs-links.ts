// Hard links after `fsck.erofs --extract`. Before erofs-utils 1.7 the extractor writes every name of a hard-linked
// file as a separate copy (1.7 added "fsck: add support for extracting hard links"); Debian 12 ships 1.5. The
// image itself keeps them as one inode, so this reads the image's directory tree (not file data: only
// directories, which mkfs.erofs never compresses) and, for every inode with several names, makes the extracted
// copies one file again. On an extractor that already links them there is nothing to do.
//
// Read from the on-disk format (include/erofs_fs.h): the superblock at 1024, inodes at meta_blkaddr * block size
// + nid * 32 (32-byte compact or 64-byte extended), directory data plain (layout 0) or with the last block inline
// after the inode and its xattrs (layout 2), each block an array of 12-byte dirents followed by their names.
import { lstat, link, open, realpath, rename, stat, utimes, type FileHandle } from "node:fs/promises";
import { randomBytes } from "node:crypto";
import { dirname, join } from "node:path";
import { AgentError } from "./agent-error.ts";

const EROFS_MAGIC = 0xe0f5e1e2;
const SUPER_OFFSET = 1024;
const DIRENT_SIZE = 12;
const FT_REG_FILE = 1;
const FT_DIR = 2;
const LAYOUT_FLAT_PLAIN = 0;
const LAYOUT_FLAT_INLINE = 2;

interface Superblock {
  blockSize: number;
  rootNid: number;
  metaBlkaddr: number;
}

interface DirInode {
  pos: number;
  headerSize: number;
  layout: number;
  size: number;
  rawBlkaddr: number;
}

function corrupt(file: string, what: string): AgentError {
  return new AgentError("tool_failed", `reading the erofs image ${file} for hard links: ${what}`);
}

async function readAt(fh: FileHandle, pos: number, length: number): Promise<Buffer> {
  const buf = Buffer.alloc(length);
  const { bytesRead } = await fh.read(buf, 0, length, pos);
  return buf.subarray(0, bytesRead);
}

async function readSuperblock(fh: FileHandle, file: string): Promise<Superblock> {
  const sb = await readAt(fh, SUPER_OFFSET, 128);
  if (sb.length < 128 || sb.readUInt32LE(0) !== EROFS_MAGIC) throw corrupt(file, "no erofs superblock");
  const blkszbits = sb.readUInt8(12);
  if (blkszbits < 9 || blkszbits > 16) throw corrupt(file, `block size 2^${blkszbits}`);
  return { blockSize: 1 << blkszbits, rootNid: sb.readUInt16LE(14), metaBlkaddr: sb.readUInt32LE(40) };
}

async function readDirInode(fh: FileHandle, sb: Superblock, nid: number, file: string): Promise<DirInode> {
  const pos = sb.metaBlkaddr * sb.blockSize + nid * 32;
  const raw = await readAt(fh, pos, 64);
  if (raw.length < 32) throw corrupt(file, `inode ${nid} is past the end`);
  const format = raw.readUInt16LE(0);
  const extended = (format & 1) === 1;
  const xattrCount = raw.readUInt16LE(2);
  const xattrSize = xattrCount === 0 ? 0 : 12 + (xattrCount - 1) * 4;
  const size = extended ? Number(raw.readBigUInt64LE(8)) : raw.readUInt32LE(8);
  return { pos, headerSize: (extended ? 64 : 32) + xattrSize, layout: (format >> 1) & 7, size, rawBlkaddr: raw.readUInt32LE(16) };
}

/** A directory's data, block by block (each block holds whole dirents and their names). */
async function* dirBlocks(fh: FileHandle, sb: Superblock, inode: DirInode, file: string): AsyncGenerator<Buffer> {
  if (inode.layout !== LAYOUT_FLAT_PLAIN && inode.layout !== LAYOUT_FLAT_INLINE) {
    throw corrupt(file, `a directory with data layout ${inode.layout} (only plain and inline are read)`);
  }
  const blocks = Math.ceil(inode.size / sb.blockSize);
  for (let i = 0; i < blocks; i++) {
    const length = Math.min(sb.blockSize, inode.size - i * sb.blockSize);
    const inline = inode.layout === LAYOUT_FLAT_INLINE && i === blocks - 1;
    const pos = inline ? inode.pos + inode.headerSize : (inode.rawBlkaddr + i) * sb.blockSize;
    yield await readAt(fh, pos, length);
  }
}

interface Dirent {
  nid: number;
  type: number;
  name: string;
}

function parseDirBlock(block: Buffer, file: string): Dirent[] {
  if (block.length < DIRENT_SIZE) return [];
  const count = block.readUInt16LE(8) / DIRENT_SIZE;
  if (!Number.isInteger(count) || count < 1 || count * DIRENT_SIZE > block.length) throw corrupt(file, "a malformed directory block");
  const entries: Dirent[] = [];
  for (let i = 0; i < count; i++) {
    const at = i * DIRENT_SIZE;
    const start = block.readUInt16LE(at + 8);
    const end = i + 1 < count ? block.readUInt16LE(at + DIRENT_SIZE + 8) : block.length;
    let bytes = block.subarray(start, end);
    // The last name of a block runs to the block's end or to NUL padding.
    const nul = bytes.indexOf(0);
    if (nul >= 0) bytes = bytes.subarray(0, nul);
    const name = bytes.toString("utf8");
    // A name that is not UTF-8 cannot be named through Node's string paths: it is left as it was extracted.
    if (!Buffer.from(name, "utf8").equals(bytes)) continue;
    entries.push({ nid: Number(block.readBigUInt64LE(at)), type: block.readUInt8(at + 10), name });
  }
  return entries;
}

/** Every regular file inode with more than one name, as the names (relative, '/'-separated, walk order). */
export async function erofsHardLinkGroups(file: string): Promise<string[][]> {
  const fh = await open(file, "r");
  try {
    const sb = await readSuperblock(fh, file);
    const namesOf = new Map<number, string[]>();
    const seenDirs = new Set<number>();
    const stack: { nid: number; rel: string }[] = [{ nid: sb.rootNid, rel: "" }];
    while (stack.length) {
      const { nid, rel } = stack.pop()!;
      if (seenDirs.has(nid)) throw corrupt(file, `directory inode ${nid} is reached twice`);
      seenDirs.add(nid);
      const inode = await readDirInode(fh, sb, nid, file);
      for await (const block of dirBlocks(fh, sb, inode, file)) {
        for (const e of parseDirBlock(block, file)) {
          if (e.name === "." || e.name === "..") continue;
          if (e.name === "" || e.name.includes("/")) throw corrupt(file, `a directory entry named '${e.name}'`);
          const path = rel ? `${rel}/${e.name}` : e.name;
          if (e.type === FT_DIR) stack.push({ nid: e.nid, rel: path });
          else if (e.type === FT_REG_FILE) namesOf.set(e.nid, [...(namesOf.get(e.nid) ?? []), path]);
        }
      }
    }
    return [...namesOf.values()].filter((names) => names.length > 1);
  } finally {
    await fh.close();
  }
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
