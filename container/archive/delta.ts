// Changed-files deltas: what changed in a tree since a base snapshot, found from metadata as git's index and
// restic do, so an incremental reads only what changed. (An overlay's delta needs no guessing: its upper directory
// is the change set, and everything else is the base image's; see overlay-layer.ts.)
//
//   1. walk the tree (lstat only: tree-walk.ts) and compare each entry with the base manifest's entry:
//        cheap fields   type, mode, size, mtime (s), symlink target, hard-link name  → differ: changed
//        lstat key      inode, device, mtime ns, ctime ns (EntryStat)              → all equal: unchanged
//      A file whose cheap fields agree but whose lstat key differs (touched in place, or restored into a new
//      sandbox, or a base manifest from before the key existed) is a suspect: it is hashed and compared with
//      the base's hash, and archived only if its content differs. `rehash` makes every such file a suspect.
//      Directories and symlinks are never suspects: a moved key gets them archived (a header, no content).
//   2. unchanged entries keep the base's recorded hash (no read); changed ones are archived, and hashed as
//      they stream into the delta archive (archive.ts). Every name of a hard-link group with a changed member is
//      archived, first name first, so tar records the others as links to it; so is each changed entry's parent
//      directory (tar --no-recursion: its own header), so extraction sets the directory's mtime back.
//   3. base entries no longer present are the deletions, deepest first; they travel beside the delta archive
//      and are removed before extraction on restore.
//
// The native engine applies the same rule when it makes the delta (native/lazy/internal/pack/delta_classify.go, from
// the agent's kept base): a change here is a change there; test/node/delta-engine-integration.test.ts compares the two.
import { mkdir, rm, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { isDeepStrictEqual } from "node:util";
import { AgentError } from "../http/agent-error.ts";
import { hashFile, holesOf, totalsOf } from "../manifest/manifest.ts";
import type { LayerManifest, Manifest, ManifestEntry } from "../contract/protocol.ts";
import { walkAll, type WalkEntry, type WalkOptions } from "../manifest/tree-walk.ts";

const CHEAP = ["type", "mode", "size", "mtime", "target", "link"] as const satisfies (keyof ManifestEntry & keyof WalkEntry)[];
const HASH_CONCURRENCY = 8;

export interface DeltaClassification {
  /** paths of new and changed entries, decided from metadata alone */
  changed: Set<string>;
  /** files to hash and compare with the base before deciding */
  suspects: WalkEntry[];
  /** base paths that are gone, deepest first */
  deleted: string[];
  base: Map<string, ManifestEntry>;
}

/** chown moves only ctime, so the content check would call the file unchanged; a base without owners compares none. */
const ownerMoved = (old: ManifestEntry, e: WalkEntry) => old.uid !== undefined && (old.uid !== e.uid || old.gid !== e.gid);

function sameKey(a: ManifestEntry["stat"], b: WalkEntry["stat"]): boolean {
  return !!a && a.ino === b.ino && a.dev === b.dev && a.mtimeNs === b.mtimeNs && a.ctimeNs === b.ctimeNs;
}

/** Pure: sorts the walk into changed, suspect and unchanged entries, and finds the deletions. */
export function classifyByMetadata(walk: WalkEntry[], base: Manifest, options: { rehash?: boolean } = {}): DeltaClassification {
  const before = new Map(base.entries.map((e) => [e.path, e]));
  const changed = new Set<string>();
  const suspects: WalkEntry[] = [];
  const seen = new Set<string>();
  for (const e of walk) {
    if (e.socket) continue;
    seen.add(e.path);
    const old = before.get(e.path);
    if (!old || CHEAP.some((k) => old[k] !== e[k]) || ownerMoved(old, e)) changed.add(e.path);
    else if (e.type !== "file") {
      // A directory's or symlink's header is all there is to archive: when its key moved (an entry removed in
      // the same second, say), archive it rather than trust whole-second mtimes.
      if (!sameKey(old.stat, e.stat)) changed.add(e.path);
    } else if (!e.link && (options.rehash || !sameKey(old.stat, e.stat))) {
      // A later hard-link name shares its first name's content: the first name's check covers it.
      if (old.sha256 === undefined) changed.add(e.path);
      else suspects.push(e);
    }
  }
  const deleted = base.entries
    .map((e) => e.path)
    .filter((p) => !seen.has(p))
    .sort((a, b) => b.split("/").length - a.split("/").length || (a < b ? 1 : -1));
  // A restore removes a deleted entry, which moves its directory's mtime: archive that directory too, so that
  // extracting it after the deletions puts the mtime back. (The source's directory may not have moved: an entry a
  // backup's selection leaves out is still there.)
  for (const p of deleted) {
    const parent = p.slice(0, Math.max(0, p.lastIndexOf("/")));
    if (parent && seen.has(parent)) changed.add(parent);
  }
  return { changed, suspects, deleted, base: before };
}

/** Hashes the suspects (a few at a time) and marks those whose content differs from the base as changed. */
export async function confirmSuspects(dir: string, c: DeltaClassification): Promise<{ hashed: number; hashedBytes: number }> {
  let next = 0;
  let hashedBytes = 0;
  const worker = async () => {
    while (next < c.suspects.length) {
      const e = c.suspects[next++]!;
      const sha256 = await hashFile(join(dir, e.path), e.size);
      hashedBytes += e.size;
      if (sha256 !== c.base.get(e.path)!.sha256) c.changed.add(e.path);
    }
  };
  await Promise.all(Array.from({ length: HASH_CONCURRENCY }, worker));
  return { hashed: c.suspects.length, hashedBytes };
}

/**
 * The names to archive, in walk order: the changed entries, every name of a hard-link group that has a changed
 * member, and the parent directory of each of those.
 */
export function deltaList(walk: WalkEntry[], changed: Set<string>): string[] {
  const groupOf = (e: WalkEntry) => e.link ?? e.path;
  const changedGroups = new Set<string>();
  const firstNames = new Set(walk.filter((e) => e.link).map((e) => e.link!));
  for (const e of walk) if (changed.has(e.path) && (e.link || firstNames.has(e.path))) changedGroups.add(groupOf(e));
  const listed = new Set<string>();
  for (const e of walk) {
    if (e.socket) continue;
    if (!changed.has(e.path) && !(e.type === "file" && changedGroups.has(groupOf(e)))) continue;
    listed.add(e.path);
    const slash = e.path.lastIndexOf("/");
    if (slash > 0) listed.add(e.path.slice(0, slash));
  }
  return walk.filter((e) => listed.has(e.path)).map((e) => e.path);
}

/**
 * The manifest of the tree after the delta: walk order; archived entries as the tar stream described them,
 * the others as the base recorded them (their hash kept), each with the lstat key of this walk.
 */
export function mergeDeltaManifest(walk: WalkEntry[], base: Map<string, ManifestEntry>, archived: Map<string, ManifestEntry>): ManifestEntry[] {
  const out: ManifestEntry[] = [];
  for (const e of walk) {
    if (e.socket) continue;
    const got = archived.get(e.path);
    if (got) out.push({ ...got, stat: e.stat });
    else {
      const old = base.get(e.path);
      if (!old) throw new AgentError("tool_failed", `internal: ${e.path} is new but was not archived`);
      out.push({ ...old, stat: e.stat });
    }
  }
  return out;
}

/**
 * The delta's manifest as a layer over its base's (version 2, manifest-layer.ts applies it): the entries the merged
 * manifest holds otherwise than the base did (archived ones, and unchanged files whose lstat key moved: a suspect
 * whose content agreed) and the deleted paths. Stored instead of the whole tree's, it costs what changed.
 */
export function deltaLayer(merged: Manifest, base: Map<string, ManifestEntry>, deleted: string[], baseId: string): LayerManifest {
  const entries = merged.entries.filter((e) => {
    const old = base.get(e.path);
    return !old || !isDeepStrictEqual(old, e);
  });
  return { version: 2, base: baseId, entries, removed: deleted, opaque: [], totals: merged.totals, ...(merged.selection ? { selection: merged.selection } : {}) };
}

export interface DeltaPlan {
  manifest: Manifest;
  changed: number;
  changedBytes: number;
  deleted: string[];
}

/**
 * The two-request delta of POST /v1/delta (plan, then archive the list): found by metadata as above, but its
 * manifest must carry the changed files' hashes before they are archived, so those files are read here and
 * again by tar. The single-pass archive with a base (archive.ts) reads them once.
 */
export async function planDelta(dir: string, base: Manifest, listFile: string, options: { rehash?: boolean; exclude?: WalkOptions["exclude"] } = {}): Promise<DeltaPlan> {
  // Excluded entries are not in the walk: a base entry that is excluded now counts as deleted.
  const walk = await walkAll(dir, { exclude: options.exclude });
  const c = classifyByMetadata(walk, base, { rehash: options.rehash });
  await confirmSuspects(dir, c);
  const list = deltaList(walk, c.changed);
  const archived = new Map<string, ManifestEntry>();
  const byPath = new Map(walk.map((e) => [e.path, e]));
  for (const path of list) {
    const { stat: _stat, socket: _socket, allocated, ...e } = byPath.get(path)!;
    const entry: ManifestEntry = e;
    if (e.type === "file" && !e.link) entry.sha256 = await hashFile(join(dir, path), e.size);
    const holes = e.type === "file" && allocated !== undefined ? holesOf(e.size, allocated) : undefined;
    if (holes) entry.holes = holes;
    archived.set(path, entry);
  }
  const entries = mergeDeltaManifest(walk, c.base, archived);
  await mkdir(dirname(listFile), { recursive: true });
  await writeFile(listFile, list.map((path) => `./${path}\0`).join(""));
  const changedBytes = walk.reduce((n, e) => n + (c.changed.has(e.path) && e.type === "file" ? e.size : 0), 0);
  return { manifest: { version: 1, entries, totals: totalsOf(entries) }, changed: c.changed.size, changedBytes, deleted: c.deleted };
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
