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
import { AgentError } from "../http/agent-error.ts";
import { totalsOf } from "./manifest.ts";
import type { LayerManifest, Manifest, ManifestEntry } from "../contract/protocol.ts";

/** The walk's order (tree-walk.ts): depth-first, a directory before what it holds, names in sort order. */
export function walkOrder(a: string, b: string): number {
  // Name by name is code unit by code unit with '/' below every other unit: a name that is a prefix of another
  // ends first ("a/…" before "a.b"). Compared in place: the merges (sorted-match.ts) call this once an entry.
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x !== y) return x === 0x2f ? -1 : y === 0x2f ? 1 : x < y ? -1 : 1;
  }
  return a.length - b.length;
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

/** Dropped files whose hash a later hard-link name may need (rule 2), remembered at most: ~10 MB of paths and hashes. */
export const DROPPED_FILES_REMEMBERED = 65_536;

/**
 * applyLayer over a stream of base entries (in walk order), for a restore that reads its base as a stream
 * (manifest-file.ts openManifest): the layer is held, the base is not. Rule 2 needs the hash of a group's first name
 * the layer dropped, which passed before its other names: the last DROPPED_FILES_REMEMBERED dropped files' hashes
 * are kept, and a base that regroups a link to one forgotten before is refused rather than read wrong.
 */
export async function* applyLayerStream(base: AsyncIterable<ManifestEntry[]>, layer: LayerManifest, field = "expected"): AsyncGenerator<ManifestEntry[]> {
  const replaced = new Set(layer.entries.map((e) => e.path));
  const removed = new Set(layer.removed);
  const hiding = new Set([...layer.opaque, ...layer.entries.filter((e) => e.type !== "dir").map((e) => e.path)]);
  const dropped = (path: string) => replaced.has(path) || removed.has(path) || ancestors(path).some((a) => removed.has(a) || hiding.has(a));
  const droppedSha = new Map<string, string | undefined>();
  let forgotten = 0;
  const newFirst = new Map<string, string>();
  const layerEntries = [...layer.entries].sort((a, b) => walkOrder(a.path, b.path));
  let j = 0;
  for await (const batch of base) {
    const outs: ManifestEntry[] = [];
    for (const e of batch) {
      if (dropped(e.path)) {
        if (e.type === "file" && e.link === undefined) {
          droppedSha.set(e.path, e.sha256);
          if (droppedSha.size > DROPPED_FILES_REMEMBERED) {
            droppedSha.delete(droppedSha.keys().next().value as string);
            forgotten++;
          }
        }
        continue;
      }
      let out = e;
      if (e.link !== undefined && dropped(e.link)) {
        const first = newFirst.get(e.link);
        if (first !== undefined) out = { ...e, link: first };
        else {
          if (!droppedSha.has(e.link) && forgotten > 0) {
            throw new AgentError("bad_request", `a layer drops more than ${DROPPED_FILES_REMEMBERED} files between ${e.link} and its hard link ${e.path}: not read`, field);
          }
          if (newFirst.size >= DROPPED_FILES_REMEMBERED) throw new AgentError("bad_request", `a layer regroups more than ${DROPPED_FILES_REMEMBERED} hard-link groups: not read`, field);
          newFirst.set(e.link, e.path);
          const { link: _link, ...rest } = e;
          const sha256 = droppedSha.get(e.link);
          out = sha256 === undefined ? rest : { ...rest, sha256 };
        }
      }
      while (j < layerEntries.length && walkOrder(layerEntries[j]!.path, out.path) < 0) outs.push(layerEntries[j++]!);
      outs.push(out);
    }
    if (outs.length) yield outs;
  }
  if (j < layerEntries.length) yield layerEntries.slice(j);
}
