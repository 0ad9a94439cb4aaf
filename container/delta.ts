// Changed-files deltas: what changed in a tree since a previous snapshot, computed from that snapshot's manifest.
// Works without overlayfs and without privileges. The delta archive holds the new and changed entries only
// (tar --no-recursion over a list); the deleted paths travel beside it and are removed before extraction on
// restore, so that extraction restores the mtimes of the directories they were removed from.
import { writeFile, mkdir, rm } from "node:fs/promises";
import { dirname, join } from "node:path";
import { AgentError } from "./agent-error.ts";
import { takeManifest } from "./manifest.ts";
import type { Manifest, ManifestEntry } from "./protocol.ts";

const SAME: (keyof ManifestEntry)[] = ["type", "mode", "size", "mtime", "target", "sha256", "link"];

export interface DeltaPlan {
  manifest: Manifest;
  changed: number;
  changedBytes: number;
  deleted: string[];
}

/** Compares the tree at `dir` with `base`, writes the changed paths (NUL-separated, for tar -T) to `listFile`. */
export async function planDelta(dir: string, base: Manifest, listFile: string): Promise<DeltaPlan> {
  const manifest = await takeManifest(dir);
  const before = new Map(base.entries.map((e) => [e.path, e]));
  const changed: ManifestEntry[] = [];
  for (const e of manifest.entries) {
    const old = before.get(e.path);
    before.delete(e.path);
    if (!old || SAME.some((k) => old[k] !== e[k])) changed.push(e);
  }
  // Deepest first, so removing a directory's children never trips over the directory itself.
  const deleted = [...before.keys()].sort((a, b) => b.split("/").length - a.split("/").length || (a < b ? 1 : -1));
  // Extracting an entry unlinks and recreates it, which touches its directory's mtime; listing the parent too
  // (tar --no-recursion: just the directory's own metadata) sets it back after extraction.
  const listed = new Set(changed.map((e) => e.path));
  for (const e of changed) {
    const parent = e.path.includes("/") ? e.path.slice(0, e.path.lastIndexOf("/")) : "";
    if (parent) listed.add(parent);
  }
  await mkdir(dirname(listFile), { recursive: true });
  await writeFile(listFile, [...listed].sort().map((path) => `./${path}\0`).join(""));
  return { manifest, changed: changed.length, changedBytes: changed.reduce((n, e) => n + (e.type === "file" ? e.size : 0), 0), deleted };
}

/** Removes relative entries below `dir`; each must stay inside it. */
export async function removeEntries(dir: string, entries: string[]): Promise<{ removed: number }> {
  for (const [i, rel] of entries.entries()) {
    if (rel === "" || rel.startsWith("/") || rel.split("/").includes("..") || rel.includes("\0")) {
      throw new AgentError("path_outside_root", `entries.${i} must be a relative path inside the tree, got '${rel}'`, `entries.${i}`);
    }
  }
  for (const rel of entries) await rm(join(dir, rel), { recursive: true, force: true });
  return { removed: entries.length };
}
