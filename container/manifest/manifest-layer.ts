// A layer manifest (version 2, what an overlay delta stores) applied to its base's manifest gives the tree's
// manifest, as a walk of the overlay shows it. Pure: where a manifest is read (manifest-file.ts), not where the
// backup is made, so a fork's backup reads neither the base manifest nor the base image.
//
//   1. base entries go when the layer replaces them (same path), removes them or an ancestor (a whiteout), hides
//      them below an opaque directory, or has a non-directory where their ancestor was;
//   2. a hard-link group of the base that lost names keeps the rest as one group: its first remaining name (walk
//      order) becomes the first name, with the group's hash, and the others link to it (the overlay shows the
//      lower inode under its remaining names; a copied-up name is a file of its own, in the layer);
//   3. base and layer entries are merged in walk order (depth-first, names sorted), so the result is the array a
//      walk of the tree gives.
import { totalsOf } from "./manifest.ts";
import type { LayerManifest, Manifest, ManifestEntry } from "../contract/protocol.ts";

/** The walk's order (tree-walk.ts): depth-first, a directory before what it holds, names in sort order. */
export function walkOrder(a: string, b: string): number {
  const x = a.split("/");
  const y = b.split("/");
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    if (x[i] !== y[i]) return x[i]! < y[i]! ? -1 : 1;
  }
  return x.length - y.length;
}

/** Proper ancestors of a relative path, nearest last: "a/b/c" → "a", "a/b". */
export function ancestors(path: string): string[] {
  const out: string[] = [];
  for (let i = path.indexOf("/"); i !== -1; i = path.indexOf("/", i + 1)) out.push(path.slice(0, i));
  return out;
}

export function applyLayer(base: Manifest, layer: LayerManifest): Manifest {
  const replaced = new Map(layer.entries.map((e) => [e.path, e]));
  const removed = new Set(layer.removed);
  // Below these, nothing of the base is visible: opaque directories, and the layer's non-directories.
  const hiding = new Set([...layer.opaque, ...layer.entries.filter((e) => e.type !== "dir").map((e) => e.path)]);
  const gone = (path: string) => removed.has(path) || ancestors(path).some((a) => removed.has(a) || hiding.has(a));
  const kept = base.entries.filter((e) => !replaced.has(e.path) && !gone(e.path));

  // Hard-link groups whose first name went: the remaining names regroup under the first of them.
  const keptPaths = new Set(kept.map((e) => e.path));
  const byPath = new Map(base.entries.map((e) => [e.path, e]));
  const newFirst = new Map<string, string>();
  const regrouped = kept.map((e): ManifestEntry => {
    if (e.link === undefined || keptPaths.has(e.link)) return e;
    const first = newFirst.get(e.link);
    if (first !== undefined) return { ...e, link: first };
    newFirst.set(e.link, e.path);
    const { link: _link, ...rest } = e;
    const sha256 = byPath.get(e.link)?.sha256;
    return sha256 === undefined ? rest : { ...rest, sha256 };
  });

  const layerEntries = [...layer.entries].sort((a, b) => walkOrder(a.path, b.path));
  const entries: ManifestEntry[] = [];
  let i = 0;
  let j = 0;
  while (i < regrouped.length || j < layerEntries.length) {
    const takeBase = j === layerEntries.length || (i < regrouped.length && walkOrder(regrouped[i]!.path, layerEntries[j]!.path) < 0);
    entries.push(takeBase ? regrouped[i++]! : layerEntries[j++]!);
  }
  const selection = layer.selection ?? base.selection;
  return { version: 1, entries, totals: totalsOf(entries), ...(selection ? { selection } : {}) };
}
