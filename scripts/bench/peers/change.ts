// The "10 MB change" between a first backup and an incremental one, the same for restic and snapflow:
// a seeded choice of existing files rewritten in place at their own size (at most half the budget), plus new
// files under peers-change/ that bring the total of written bytes to exactly `bytes`. All content is
// incompressible (AES-CTR keyed by the seed), as fresh build output or a pulled pack would be.
//
// It is undone afterwards (old content and mtimes put back, new files removed) so that every run starts from
// the same tree. The same (tree, seed, bytes) gives the same files and the same bytes.
import { createCipheriv, createHash } from "node:crypto";
import { lstat, mkdir, readdir, readFile, rm, utimes, writeFile } from "node:fs/promises";
import { join, relative } from "node:path";

export const CHANGE_DIR = "peers-change";
const REWRITE_MIN = 4096;
const REWRITE_MAX = 1 << 20;
const REWRITE_FILES = 24;
const NEW_FILES = 8;

export interface AppliedChange {
  rewritten: string[];
  added: string[];
  bytes: number;
  /** puts the tree back as it was */
  undo(): Promise<void>;
}

function bytesFor(seed: number, label: string, size: number): Buffer {
  const key = createHash("sha256").update(`peers-change:${seed}:${label}`).digest();
  return createCipheriv("aes-128-ctr", key.subarray(0, 16), key.subarray(16, 32)).update(Buffer.alloc(size));
}

/** Regular files of a tree, relative, sorted (skipping .git: a user's change rarely rewrites packs in place). */
async function regularFiles(root: string): Promise<{ path: string; size: number }[]> {
  const out: { path: string; size: number }[] = [];
  const walk = async (dir: string) => {
    for (const e of await readdir(dir, { withFileTypes: true })) {
      const full = join(dir, e.name);
      if (e.isDirectory() && e.name !== ".git") await walk(full);
      else if (e.isFile()) out.push({ path: relative(root, full), size: (await lstat(full)).size });
    }
  };
  await walk(root);
  return out.sort((a, b) => (a.path < b.path ? -1 : 1));
}

export async function applyChange(root: string, seed: number, bytes: number): Promise<AppliedChange> {
  const rank = (p: string) => createHash("sha256").update(`${seed}:${p}`).digest().readUInt32BE(0);
  const candidates = (await regularFiles(root)).filter((f) => f.size >= REWRITE_MIN && f.size <= REWRITE_MAX && !f.path.startsWith(CHANGE_DIR + "/"));
  const chosen: typeof candidates = [];
  let rewriteBytes = 0;
  for (const f of candidates.sort((a, b) => rank(a.path) - rank(b.path) || (a.path < b.path ? -1 : 1))) {
    if (chosen.length >= REWRITE_FILES) break;
    if (rewriteBytes + f.size > bytes / 2) continue;
    chosen.push(f);
    rewriteBytes += f.size;
  }
  const saved: { path: string; content: Buffer; atime: Date; mtime: Date }[] = [];
  for (const f of chosen) {
    const full = join(root, f.path);
    const st = await lstat(full);
    saved.push({ path: full, content: await readFile(full), atime: st.atime, mtime: st.mtime });
    await writeFile(full, bytesFor(seed, f.path, f.size));
  }
  const added: string[] = [];
  const rest = bytes - rewriteBytes;
  await mkdir(join(root, CHANGE_DIR), { recursive: true });
  for (let i = 0; i < NEW_FILES; i++) {
    const size = Math.floor(rest / NEW_FILES) + (i < rest % NEW_FILES ? 1 : 0);
    const path = join(CHANGE_DIR, `chunk-${i}.bin`);
    await writeFile(join(root, path), bytesFor(seed, path, size));
    added.push(path);
  }
  return {
    rewritten: chosen.map((f) => f.path),
    added,
    bytes,
    async undo() {
      await rm(join(root, CHANGE_DIR), { recursive: true, force: true });
      for (const s of saved) {
        await writeFile(s.path, s.content);
        await utimes(s.path, s.atime, s.mtime);
      }
    },
  };
}
