// The metadata walk: every entry below a root, depth-first in sorted order, from lstat alone (no content read;
// owners included, which a restore that keeps them compares).
// It is what a single-pass backup hands tar as its list of names, what an incremental compares with the base
// manifest (type, mode, size, mtime, symlink target, hard-link grouping and the lstat key: inode, device,
// mtime and ctime in nanoseconds, as git's index and restic do), and what a restore's metadata check compares.
//
// lstat and readdir are called synchronously: for 30k small entries the thread-pool round trip of the async
// calls costs more than the calls. The walk yields to the event loop every BATCH entries so the agent keeps
// answering other requests, and it is an async generator so tar can start on the first names at once.
import { lstatSync, readdirSync, readlinkSync, type BigIntStats } from "node:fs";
import { join } from "node:path";
import type { EntryType, ManifestEntry } from "../contract/protocol.ts";

const BATCH = 512;
const NS_PER_S = 1_000_000_000n;

/** A manifest entry without a content hash, with the lstat key; `socket` entries are ones tar cannot archive. */
export interface WalkEntry extends Omit<ManifestEntry, "sha256" | "stat"> {
  stat: NonNullable<ManifestEntry["stat"]>;
  socket?: true;
}

function typeOf(st: BigIntStats): EntryType {
  return st.isFile() ? "file" : st.isDirectory() ? "dir" : st.isSymbolicLink() ? "symlink" : "other";
}

/** Whole seconds, floored (as Math.floor of a negative time would be), from nanoseconds. */
export function secondsOf(ns: bigint): number {
  const s = ns / NS_PER_S;
  return Number(ns < 0n && s * NS_PER_S !== ns ? s - 1n : s);
}

const gone = (e: unknown) => (e as NodeJS.ErrnoException).code === "ENOENT" || (e as NodeJS.ErrnoException).code === "ENOTDIR";

function namesIn(dir: string): string[] {
  try {
    return readdirSync(dir).sort();
  } catch (e) {
    if (gone(e)) return [];
    throw e;
  }
}

function readTarget(path: string): string | undefined {
  try {
    return readlinkSync(path);
  } catch (e) {
    if (gone(e)) return undefined;
    throw e;
  }
}

/** A backup's selection (selection.ts): an excluded entry is left out, and the walk does not descend into it. */
export interface WalkOptions {
  exclude?: (rel: string, isDir: boolean, hostPath: string) => boolean;
}

export async function* walkTree(root: string, options: WalkOptions = {}): AsyncGenerator<WalkEntry> {
  const firstNameOfInode = new Map<string, string>();
  let sinceYield = 0;
  // An explicit stack of directories (each with its sorted names) instead of recursion, so the generator can
  // yield between any two entries.
  const stack: { dir: string; rel: string; names: string[]; next: number }[] = [{ dir: root, rel: "", names: readdirSync(root).sort(), next: 0 }];
  while (stack.length) {
    const top = stack[stack.length - 1]!;
    if (top.next === top.names.length) {
      stack.pop();
      continue;
    }
    const name = top.names[top.next++]!;
    const hostPath = join(top.dir, name);
    const path = top.rel ? `${top.rel}/${name}` : name;
    // A name removed since its directory was read is simply not there any more; one removed after this lstat
    // is tar's to notice (it fails the archive naming it).
    const st = lstatSync(hostPath, { bigint: true, throwIfNoEntry: false });
    if (!st) continue;
    if (options.exclude?.(path, st.isDirectory(), hostPath)) continue;
    const type = typeOf(st);
    const entry: WalkEntry = {
      path,
      type,
      mode: Number(st.mode & 0o7777n),
      size: type === "dir" ? 0 : Number(st.size),
      mtime: secondsOf(st.mtimeNs),
      uid: Number(st.uid),
      gid: Number(st.gid),
      stat: { ino: String(st.ino), dev: String(st.dev), mtimeNs: String(st.mtimeNs), ctimeNs: String(st.ctimeNs) },
    };
    if (type === "symlink") {
      const target = readTarget(hostPath);
      if (target === undefined) continue;
      entry.target = target;
    }
    if (st.isSocket()) entry.socket = true;
    if (type === "file" && st.nlink > 1n) {
      const inode = `${st.dev}:${st.ino}`;
      const first = firstNameOfInode.get(inode);
      if (first !== undefined) entry.link = first;
      else firstNameOfInode.set(inode, path);
    }
    yield entry;
    if (type === "dir") stack.push({ dir: hostPath, rel: path, names: namesIn(hostPath), next: 0 });
    if (++sinceYield >= BATCH) {
      sinceYield = 0;
      await new Promise<void>((r) => setImmediate(r));
    }
  }
}

/** The whole walk as an array. */
export async function walkAll(root: string, options: WalkOptions = {}): Promise<WalkEntry[]> {
  const out: WalkEntry[] = [];
  for await (const e of walkTree(root, options)) out.push(e);
  return out;
}
