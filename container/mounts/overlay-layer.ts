// An overlay delta from its upper directory alone. The overlay's upper directory is what changed over the base
// image (its lower): everything else is the base's, unchanged (the lower is read-only, and was verified against the
// base manifest when it was restored). So a fork's backup walks the upper, not the tree, and stores a layer
// manifest (version 2: manifest-layer.ts) instead of the whole tree's; a restore applies it to the base's.
//
//   1. walk the upper (lstat; tar archives all of it): whiteouts (character devices 0/0) are the layer's
//      `removed`, the other entries its `entries` (metadata as the overlay shows them: an upper entry's
//      own; files hashed through the merged tree, a few at a time);
//   2. each upper directory that is also a lower directory is checked against the merged tree's listing: the
//      upper's and lower's names less whiteouts (transparent), or the upper's only (opaque: the layer's `opaque`);
//      anything else (a redirected directory, another overlay's whiteout convention) is refused, not guessed;
//   3. the tree's totals: the base's, less what the lower had where the layer removes, hides or replaces, plus
//      the upper's entries. A removed hard-linked file takes its bytes only with its last name (the base counts a
//      group once).
import { createHash } from "node:crypto";
import { lstatSync, readdirSync, type BigIntStats, type Stats } from "node:fs";
import { mkdir, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { AgentError } from "../http/agent-error.ts";
import { hashFile } from "../manifest/manifest.ts";
import { ancestors } from "../manifest/manifest-layer.ts";
import type { LayerManifest, ManifestEntry, OverlayLayerResult } from "../contract/protocol.ts";
import { walkAll, type WalkEntry } from "../manifest/tree-walk.ts";

const HASH_CONCURRENCY = 8;
type Totals = LayerManifest["totals"];

export interface OverlayLayerRequest {
  /** host paths: the overlay's merged tree, its upper and its lower */
  merged: string;
  upper: string;
  lower: string;
  base: string;
  baseTotals: Totals;
  /** host path of the layer manifest to write */
  manifestOut: string;
}

/** lstat, or undefined when nothing is there (also below a non-directory: the lower may hold a file where the upper has a directory). */
function lstatOf(path: string): Stats | undefined;
function lstatOf(path: string, bigint: true): BigIntStats | undefined;
function lstatOf(path: string, bigint?: true): Stats | BigIntStats | undefined {
  try {
    return bigint ? lstatSync(path, { bigint, throwIfNoEntry: false }) : lstatSync(path, { throwIfNoEntry: false });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOTDIR") return undefined;
    throw e;
  }
}
const isWhiteout = (hostPath: string) => {
  const st = lstatOf(hostPath);
  return !!st && st.isCharacterDevice() && st.rdev === 0;
};

function namesOf(dir: string): string[] {
  return lstatOf(dir)?.isDirectory() ? readdirSync(dir) : [];
}

const sameSet = (a: Set<string>, b: Set<string>) => a.size === b.size && [...a].every((x) => b.has(x));

/** Is the upper directory `rel` opaque over the lower one (it hides all of it), as the merged tree lists it? */
function isOpaque(r: OverlayLayerRequest, rel: string, whiteouts: Set<string>): boolean {
  const at = (root: string) => join(root, rel);
  const merged = new Set(readdirSync(at(r.merged)));
  const own = new Set(readdirSync(at(r.upper)).filter((n) => !whiteouts.has(rel ? `${rel}/${n}` : n)));
  const transparent = new Set([...own, ...namesOf(at(r.lower)).filter((n) => !whiteouts.has(rel ? `${rel}/${n}` : n))]);
  if (sameSet(merged, transparent)) return false;
  if (sameSet(merged, own)) return true;
  throw new AgentError("tool_failed", `the overlay at ${r.merged} lists ${rel || "its root"} as neither its layers' union nor its upper's own entries (a redirected directory, or whiteouts this agent does not read): an overlay delta cannot be taken from its upper directory`);
}

/** The lower's entries at `rel` and below (lstat only), for the totals; nlink and inode for hard-link groups. */
function lowerSubtree(lower: string, rel: string, out: { type: string; size: number; ino: bigint; nlink: bigint }[]): void {
  const st = lstatOf(join(lower, rel), true);
  if (!st) return;
  out.push({ type: st.isFile() ? "file" : st.isDirectory() ? "dir" : st.isSymbolicLink() ? "symlink" : "other", size: Number(st.size), ino: st.ino, nlink: st.nlink });
  if (st.isDirectory()) for (const name of readdirSync(join(lower, rel))) lowerSubtree(lower, `${rel}/${name}`, out);
}

/** The totals of the tree after the layer: the base's, less the lower entries it takes away, plus its own. */
function layerTotals(r: OverlayLayerRequest, entries: ManifestEntry[], removed: string[], opaque: Set<string>): Totals {
  // What the layer takes from the lower: whole subtrees (removed, replaced by a non-directory or by anything over a
  // non-directory, below an opaque directory), and single directories it replaces by its own.
  const subtrees = new Set(removed);
  const dirs: string[] = [];
  for (const e of entries) {
    const lower = lstatOf(join(r.lower, e.path));
    if (!lower) continue;
    if (e.type !== "dir" || !lower.isDirectory()) subtrees.add(e.path);
    else {
      dirs.push(e.path);
      if (opaque.has(e.path)) for (const name of readdirSync(join(r.lower, e.path))) subtrees.add(`${e.path}/${name}`);
    }
  }
  // One below another is counted with it.
  const covered = (p: string) => ancestors(p).some((a) => subtrees.has(a));
  const gone: Parameters<typeof lowerSubtree>[2] = [];
  for (const root of subtrees) if (!covered(root)) lowerSubtree(r.lower, root, gone);
  for (const dir of dirs) if (!subtrees.has(dir) && !covered(dir)) gone.push({ type: "dir", size: 0, ino: 0n, nlink: 1n });

  const t = { ...r.baseTotals };
  const namesGone = new Map<bigint, number>();
  for (const g of gone) {
    if (g.type === "dir") t.dirs--;
    else if (g.type === "symlink") t.symlinks--;
    else if (g.type === "file") {
      t.files--;
      if (g.nlink === 1n) t.bytes -= g.size;
      else {
        const n = (namesGone.get(g.ino) ?? 0) + 1;
        namesGone.set(g.ino, n);
        if (BigInt(n) === g.nlink) t.bytes -= g.size;
      }
    }
  }
  for (const e of entries) {
    if (e.type === "dir") t.dirs++;
    else if (e.type === "symlink") t.symlinks++;
    else if (e.type === "file") {
      t.files++;
      if (!e.link) t.bytes += e.size;
    }
  }
  return t;
}

async function hashFiles(merged: string, entries: ManifestEntry[]): Promise<void> {
  const files = entries.filter((e) => e.type === "file" && !e.link);
  let next = 0;
  const worker = async () => {
    while (next < files.length) {
      const e = files[next++]!;
      e.sha256 = await hashFile(join(merged, e.path), e.size);
    }
  };
  await Promise.all(Array.from({ length: HASH_CONCURRENCY }, worker));
}

export async function takeOverlayLayer(r: OverlayLayerRequest): Promise<OverlayLayerResult> {
  const started = performance.now();
  const walk: WalkEntry[] = await walkAll(r.upper);
  const whiteouts = new Set(walk.filter((e) => e.type === "other" && isWhiteout(join(r.upper, e.path))).map((e) => e.path));
  const entries: ManifestEntry[] = walk.filter((e) => !whiteouts.has(e.path) && !e.socket).map(({ stat: _stat, socket: _socket, ...e }) => e);
  const opaque = new Set<string>();
  for (const rel of ["", ...entries.filter((e) => e.type === "dir").map((e) => e.path)]) {
    if (lstatOf(join(r.lower, rel))?.isDirectory() && isOpaque(r, rel, whiteouts)) {
      if (rel === "") throw new AgentError("tool_failed", `the overlay at ${r.merged} hides its whole lower directory: back it up whole, not as a delta`);
      opaque.add(rel);
    }
  }
  await hashFiles(r.merged, entries);
  const removed = [...whiteouts];
  const layer: LayerManifest = { version: 2, base: r.base, entries, removed, opaque: [...opaque], totals: layerTotals(r, entries, removed, opaque) };

  const text = JSON.stringify(layer);
  await mkdir(dirname(r.manifestOut), { recursive: true });
  await writeFile(r.manifestOut, text);
  return {
    manifest: { bytes: Buffer.byteLength(text), sha256: createHash("sha256").update(text).digest("hex"), entries: entries.length, removed: removed.length, opaque: opaque.size, totals: layer.totals },
    changedBytes: entries.reduce((n, e) => n + (e.type === "file" && !e.link ? e.size : 0), 0),
    ms: Math.round(performance.now() - started),
  };
}
