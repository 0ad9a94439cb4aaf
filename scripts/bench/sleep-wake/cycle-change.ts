// One cycle's change of the sleep-wake bench, as a user's day in a workspace (issue 24): `bytes` of new,
// incompressible files under sleep-wake/cycle-<k>/, one file edited, one deleted (cycle 1: a file of the base;
// later: the small file the cycle before made, so the deletion is a whiteout over a delta layer), and one directory
// deleted and made again (cycle 1: a directory of the base; later: sleep-wake/remade, which the cycle before made
// again, so its opaque mark hides a delta layer). Deterministic for (tree, cycle, bytes).
import { createCipheriv, createHash } from "node:crypto";
import { mkdir, readdir, rm, writeFile, lstat } from "node:fs/promises";
import { join } from "node:path";

export const CYCLE_DIR = "sleep-wake";
const NEW_FILES = 4;

/** What cycle 1 changes of the base: chosen once from the source tree (never what first use reads). */
export interface BaseChoices {
  edited: string;
  deleted: string;
  remadeDir: string;
}

function noise(seed: string, size: number): Buffer {
  const key = createHash("sha256").update(`sleep-wake:${seed}`).digest();
  return createCipheriv("aes-128-ctr", key.subarray(0, 16), key.subarray(16, 32)).update(Buffer.alloc(size));
}

/** Files and directories of the base the first cycle edits, deletes and remakes: small, and away from `keep`. */
export async function chooseBase(root: string, keep: string[]): Promise<BaseChoices> {
  const kept = (p: string) => keep.some((k) => p === k || p.startsWith(`${k}/`));
  const holdsKept = (p: string) => keep.some((k) => k.startsWith(`${p}/`));
  const files: string[] = [];
  const dirs: string[] = [];
  const walk = async (rel: string, depth: number) => {
    for (const e of (await readdir(join(root, rel), { withFileTypes: true })).sort((a, b) => (a.name < b.name ? -1 : 1))) {
      const path = rel ? `${rel}/${e.name}` : e.name;
      if (kept(path) || e.name === ".git") continue;
      if (e.isDirectory()) {
        if (depth === 2 && !holdsKept(path)) dirs.push(path);
        if (depth < 3) await walk(path, depth + 1);
      } else if (e.isFile() && (await lstat(join(root, path))).size < 64 * 1024) files.push(path);
    }
  };
  await walk("", 1);
  const remadeDir = dirs[Math.floor(dirs.length / 2)];
  const outside = files.filter((f) => !remadeDir || !f.startsWith(`${remadeDir}/`));
  if (!remadeDir || outside.length < 2) throw new Error(`the tree at ${root} has too few small files or directories for the cycles' change`);
  return { edited: outside[0]!, deleted: outside[1]!, remadeDir };
}

/** Applies cycle `k`'s change at `root`; answers the bytes written. */
export async function applyCycleChange(root: string, k: number, bytes: number, base: BaseChoices): Promise<number> {
  const dir = join(root, CYCLE_DIR, `cycle-${k}`);
  await mkdir(dir, { recursive: true });
  let written = 0;
  for (let i = 0; i < NEW_FILES; i++) {
    const size = Math.floor(bytes / NEW_FILES) + (i < bytes % NEW_FILES ? 1 : 0);
    await writeFile(join(dir, `new-${i}.bin`), noise(`${k}:${i}`, size));
    written += size;
  }
  const small = `cycle ${k}: a small file the next cycle deletes\n`;
  await writeFile(join(dir, "small.txt"), small);
  const edit = `edited in cycle ${k}\n`;
  await writeFile(join(root, base.edited), edit);
  await rm(join(root, k === 1 ? base.deleted : join(CYCLE_DIR, `cycle-${k - 1}`, "small.txt")));
  const remade = join(root, k === 1 ? base.remadeDir : join(CYCLE_DIR, "remade"));
  await rm(remade, { recursive: true });
  await mkdir(remade, { recursive: true });
  const again = `made again in cycle ${k}\n`;
  await writeFile(join(remade, `again-${k}.txt`), again);
  // The directory later cycles delete and make again (over a delta layer).
  if (k === 1) {
    await mkdir(join(root, CYCLE_DIR, "remade"), { recursive: true });
    await writeFile(join(root, CYCLE_DIR, "remade", "first.txt"), again);
  }
  return written + small.length + edit.length + again.length * (k === 1 ? 2 : 1);
}
