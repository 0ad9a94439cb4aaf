// The agent keeps the whole-tree manifest of each of its sandbox's last backups (in /snapflow/manifests, by snapshot
// id), so the next delta reads its base from here rather than GET it from the store (9.8 MB of JSON for the npm
// workspace's 31k entries, with its chain of layers). A kept copy is used only when its SHA-256 is the one the
// base's record keeps for the tree's manifest (the Worker sends it): a copy of a backup that never got recorded,
// or one changed on disk, is not that, and the store's copy is read instead (and kept for next time).
import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { copyFile, mkdir, readdir, rename, rm, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { Manifest } from "../contract/protocol.ts";
import { loadManifest } from "./manifest-file.ts";

/** Kept: the last few, so a failed backup (kept at its archive, never recorded) does not push out the base. */
const KEEP = 3;
const ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/** Where snapshot `id`'s manifest is kept in `dir` (the native engine reads a delta's base from there itself). */
export const keptFile = (dir: string, id: string) => {
  if (!ID.test(id)) throw new Error(`not a snapshot id: ${id}`);
  return join(dir, `${id}.json`);
};
const fileOf = keptFile;

/** The kept manifest of snapshot `id` if its bytes have `sha256`; undefined when absent, different or not a manifest. */
export async function keptManifest(dir: string, id: string, sha256: string): Promise<Manifest | undefined> {
  const file = fileOf(dir, id);
  const hash = createHash("sha256");
  try {
    for await (const chunk of createReadStream(file, { highWaterMark: 1 << 20 })) hash.update(chunk as Buffer);
  } catch {
    return undefined;
  }
  if (hash.digest("hex") !== sha256) return undefined;
  // The bytes are the ones this sandbox's backup wrote and its recorded snapshot vouches for, but a sandbox that
  // forged both its copy and its record's hash chose them: read as any stored manifest is (streamed, each entry
  // validated, bounded), and a copy that is not a manifest is passed over for the store's.
  return loadManifest({ file }, "baseKept").catch(() => undefined);
}

/**
 * Keeps a whole-tree manifest's JSON (`text`, a copy of the file `from`, or the file `moved`, renamed: one the engine
 * wrote beside the kept ones) as snapshot `id`'s; the oldest beyond KEEP go. Never fails a backup: the next delta then
 * reads its base from the store.
 */
export async function keepManifest(dir: string, id: string, what: { text: string } | { from: string } | { moved: string }): Promise<void> {
  try {
    await mkdir(dir, { recursive: true });
    const file = fileOf(dir, id);
    if ("moved" in what) await rename(what.moved, file);
    else {
      if ("text" in what) await writeFile(`${file}.tmp`, what.text);
      else await copyFile(what.from, `${file}.tmp`);
      await rename(`${file}.tmp`, file);
    }
    const kept = await Promise.all((await readdir(dir)).filter((n) => n.endsWith(".json")).map(async (n) => ({ n, t: (await stat(join(dir, n)).catch(() => null))?.mtimeMs ?? 0 })));
    for (const { n } of kept.sort((a, b) => b.t - a.t).slice(KEEP)) await rm(join(dir, n), { force: true });
  } catch (e) {
    console.warn(`manifest of ${id} not kept: ${e instanceof Error ? e.message : String(e)}`);
  }
}

/**
 * The file-level format's kept indexes (`<id>.fidx.zst`, written by the engine straight into `dir`, and a restored
 * tree's stat keys beside them, `<id>.fidx.stat.zst`): the newest KEEP of each kind stay, as manifests do.
 */
export async function pruneKeptIndexes(dir: string): Promise<void> {
  for (const suffix of [".fidx.zst", ".fidx.stat.zst"]) {
    const names = (await readdir(dir).catch(() => [] as string[])).filter((n) => n.endsWith(suffix) && ID.test(n.slice(0, -suffix.length)));
    const kept = await Promise.all(names.map(async (n) => ({ n, t: (await stat(join(dir, n)).catch(() => null))?.mtimeMs ?? 0 })));
    for (const { n } of kept.sort((a, b) => b.t - a.t).slice(KEEP)) await rm(join(dir, n), { force: true });
  }
}
