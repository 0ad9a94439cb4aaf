// A manifest is the list of everything in a tree that a restore must bring back: path, type, permission bits,
// size, mtime (whole seconds: what every format keeps; squashfs keeps no more), symlink target, SHA-256 of content,
// hard-link grouping, the numeric owner and group (compared only when a restore keeps them) and a sparse file's
// holes. Backup takes one of the source; restore takes one of the result and compares.
//
// The walk is depth-first in sorted order (so two manifests of equal trees are equal arrays) and hashes
// files with a small pool of concurrent readers, since a workspace is mostly small files and the cost is I/O.
import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { lstat, readdir, readFile, readlink } from "node:fs/promises";
import { join } from "node:path";
import { refuseUndecodable } from "./tree-walk.ts";
import type { Comparison, Difference, EntryType, Manifest, ManifestEntry } from "../contract/protocol.ts";

export type { Comparison, Difference, Manifest, ManifestEntry };

const SMALL_FILE = 1 << 20;
const HASH_CONCURRENCY = 16;

export async function hashFile(path: string, size: number): Promise<string> {
  if (size <= SMALL_FILE) return createHash("sha256").update(await readFile(path)).digest("hex");
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(path, { highWaterMark: 1 << 20 })) hash.update(chunk as Buffer);
  return hash.digest("hex");
}

export function totalsOf(entries: ManifestEntry[]): Manifest["totals"] {
  const totals = { files: 0, dirs: 0, symlinks: 0, bytes: 0 };
  for (const e of entries) {
    if (e.type === "file") {
      totals.files++;
      if (!e.link) totals.bytes += e.size;
    } else if (e.type === "dir") totals.dirs++;
    else if (e.type === "symlink") totals.symlinks++;
  }
  return totals;
}

/**
 * A file's unallocated bytes, as a manifest's `holes` records them (undefined for a dense file). Filesystems
 * allocate whole blocks, so a dense file's allocation is at least its size, and a file that is one small block
 * short of it (a tail packed inline) is not called sparse: only a shortfall of more than 64 KiB is.
 */
export function holesOf(size: number, allocated: number): number | undefined {
  const holes = size - allocated;
  return holes > 64 * 1024 ? holes : undefined;
}

/**
 * `exclude`: a backup's selection (selection.ts); an excluded entry is left out with everything below it.
 * `holes`: record sparse files' unallocated bytes (a backup's manifest; a restored tree's is compared by walk).
 * `socketsLeftOut`: leave sockets out, as tar does, and list their paths here (an image builder is told to leave
 * them out too: a socket is a live endpoint, not content, and every backup leaves it behind alike).
 */
export async function takeManifest(root: string, options: { hash?: boolean; holes?: boolean; socketsLeftOut?: string[]; exclude?: (rel: string, isDir: boolean, hostPath: string) => boolean } = {}): Promise<Manifest> {
  const hash = options.hash ?? true;
  const entries: ManifestEntry[] = [];
  const firstNameOfInode = new Map<string, string>();
  const pending: Promise<void>[] = [];
  let running = 0;
  const waiters: (() => void)[] = [];
  const hashLimited = async (entry: ManifestEntry, hostPath: string) => {
    while (running >= HASH_CONCURRENCY) await new Promise<void>((r) => waiters.push(r));
    running++;
    try {
      entry.sha256 = await hashFile(hostPath, entry.size);
    } finally {
      running--;
      waiters.shift()?.();
    }
  };

  const walk = async (dir: string, rel: string): Promise<void> => {
    const names = (await readdir(dir)).sort();
    for (const name of names) {
      const hostPath = join(dir, name);
      const path = rel ? `${rel}/${name}` : name;
      const st = await lstat(hostPath).catch((e: NodeJS.ErrnoException) => {
        if (e.code === "ENOENT") refuseUndecodable(dir, name);
        throw e;
      });
      if (options.exclude?.(path, st.isDirectory(), hostPath)) continue;
      if (options.socketsLeftOut && st.isSocket()) {
        options.socketsLeftOut.push(path);
        continue;
      }
      const type: EntryType = st.isFile() ? "file" : st.isDirectory() ? "dir" : st.isSymbolicLink() ? "symlink" : "other";
      const entry: ManifestEntry = {
        path,
        type,
        mode: st.mode & 0o7777,
        size: type === "dir" ? 0 : st.size,
        mtime: Math.floor(st.mtimeMs / 1000),
        uid: st.uid,
        gid: st.gid,
      };
      entries.push(entry);
      const holes = options.holes && type === "file" ? holesOf(st.size, st.blocks * 512) : undefined;
      if (holes) entry.holes = holes;
      if (type === "symlink") entry.target = await readlink(hostPath);
      if (type === "file" && st.nlink > 1) {
        const inode = `${st.dev}:${st.ino}`;
        const first = firstNameOfInode.get(inode);
        if (first !== undefined) {
          entry.link = first;
          continue;
        }
        firstNameOfInode.set(inode, path);
      }
      if (type === "file" && hash) {
        // Awaited after the walk: marked handled now, or a read that fails meanwhile (EIO through a mount whose
        // chunk is bad) is an unhandled rejection, which ends the agent's process.
        const hashing = hashLimited(entry, hostPath);
        hashing.catch(() => {});
        pending.push(hashing);
      }
      if (type === "dir") await walk(hostPath, path);
    }
  };
  await walk(root, "");
  await Promise.all(pending);

  return { version: 1, entries, totals: totalsOf(entries) };
}

// Symlink mtimes are not compared: restoring them needs lutimes, which not every extractor uses, and no
// program reads them. Directory mtimes are compared; extractors set them after filling the directory.
const COMPARED: (keyof ManifestEntry)[] = ["type", "mode", "size", "mtime", "target", "sha256", "link"];
/** What a metadata-only check compares: everything but content (checked in the stream, or guaranteed by an image's hash). */
export const METADATA_FIELDS: (keyof ManifestEntry)[] = ["type", "mode", "size", "mtime", "target", "link"];
/** Compared when a restore kept owners; a manifest from before owners were recorded has none to compare. */
export const OWNER_FIELDS: (keyof ManifestEntry)[] = ["uid", "gid"];

export function compareManifests(expected: Manifest, actual: Manifest, limit = 20, compared: (keyof ManifestEntry)[] = COMPARED): Comparison {
  const byPath = new Map(actual.entries.map((e) => [e.path, e]));
  const differences: Difference[] = [];
  const counts = { missing: 0, extra: 0, changed: 0 };
  const note = (d: Difference) => {
    counts[d.kind]++;
    if (differences.length < limit) differences.push(d);
  };
  for (const want of expected.entries) {
    const got = byPath.get(want.path);
    if (!got) {
      note({ path: want.path, kind: "missing" });
      continue;
    }
    byPath.delete(want.path);
    const fields = compared.filter((name) => !(name === "mtime" && want.type === "symlink") && !(OWNER_FIELDS.includes(name) && want[name] === undefined))
      .filter((name) => want[name] !== got[name])
      .map((name) => ({ name, expected: want[name], actual: got[name] }));
    if (fields.length) note({ path: want.path, kind: "changed", fields });
  }
  for (const extra of byPath.keys()) note({ path: extra, kind: "extra" });
  differences.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  return { equal: counts.missing + counts.extra + counts.changed === 0, counts, differences };
}
