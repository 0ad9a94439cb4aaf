// An independent walk of a tree, hashes included, for the sleep-wake bench to compare each woken tree with what
// slept: Node's lstat and SHA-256 on the host's view of the sandbox, nothing of snapflow's manifest code. Each path
// maps to one line — type, permission bits, size, mtime in whole seconds (squashfs keeps those), and the content's
// SHA-256 or the link's target. A directory's size is the filesystem's, so it is left out.
//
// `since`: a digest of the same mount taken earlier (the woken tree, hashed whole): a file whose size, mtime, ctime,
// inode and device are still what they were keeps its hash, and only what changed since is read again (restic's
// rule). The bench uses it for the tree that slept, right after it hashed the woken tree in full: hashing both whole
// took the bench's own process ~1.1 CPU-min a cycle on the npm workspace (16.8 CPU-min over 15 cycles), more than
// the system it measures.
import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { lstat, readdir, readlink } from "node:fs/promises";
import { join } from "node:path";
import { pipeline } from "node:stream/promises";

export type TreeDigest = Map<string, string>;

export interface Walked {
  digest: TreeDigest;
  /** per file, the stat that says it is unchanged */
  statKeys: Map<string, string>;
  /** files read and hashed by this walk */
  hashed: number;
}

const HASHING = 8;

async function sha256(file: string): Promise<string> {
  const h = createHash("sha256");
  await pipeline(createReadStream(file, { highWaterMark: 1 << 20 }), h);
  return h.digest("hex");
}

export async function digestTree(root: string, since?: Walked): Promise<Walked> {
  const out: TreeDigest = new Map();
  const statKeys = new Map<string, string>();
  const files: [string, string][] = [];
  const walk = async (rel: string) => {
    for (const name of (await readdir(join(root, rel))).sort()) {
      const path = rel ? `${rel}/${name}` : name;
      const st = await lstat(join(root, path));
      const head = `${st.mode & 0o7777} ${Math.floor(st.mtimeMs / 1000)}`;
      if (st.isDirectory()) {
        out.set(path, `dir ${head}`);
        await walk(path);
      } else if (st.isSymbolicLink()) out.set(path, `symlink ${head} ${st.size} ${await readlink(join(root, path))}`);
      else if (st.isFile()) {
        const key = `${st.size} ${st.mtimeMs} ${st.ctimeMs} ${st.ino} ${st.dev}`;
        statKeys.set(path, key);
        const kept = since?.statKeys.get(path) === key ? since.digest.get(path) : undefined;
        if (kept) out.set(path, kept);
        else {
          out.set(path, `file ${head} ${st.size}`);
          files.push([path, join(root, path)]);
        }
      } else out.set(path, `other ${head} ${st.rdev}`);
    }
  };
  await walk("");
  let next = 0;
  await Promise.all(Array.from({ length: HASHING }, async () => {
    while (next < files.length) {
      const [path, full] = files[next++]!;
      out.set(path, `${out.get(path)} ${await sha256(full)}`);
    }
  }));
  return { digest: out, statKeys, hashed: files.length };
}

/** The differences between what slept and what woke, at most `limit` of them, and how many there were. */
export function compareDigests(slept: TreeDigest, woken: TreeDigest, limit = 5): { count: number; first: string[] } {
  const first: string[] = [];
  let count = 0;
  const note = (line: string) => {
    count++;
    if (first.length < limit) first.push(line);
  };
  for (const [path, line] of slept) {
    const got = woken.get(path);
    if (got === undefined) note(`missing ${path}`);
    else if (got !== line) note(`changed ${path}: ${line} → ${got}`);
  }
  for (const path of woken.keys()) if (!slept.has(path)) note(`extra ${path}`);
  return { count, first };
}
