// Manifests: a tree's entries, what a backup's selection leaves out, and layer manifests (version 2).
// Part of the agent's protocol (../protocol.ts re-exports every part): both sides import it.
import { z } from "zod";

export const EntryType = z.enum(["file", "dir", "symlink", "other"]);
export type EntryType = z.infer<typeof EntryType>;

/**
 * What lstat said of an entry just before the archiver read it (as git's index keeps it): the key that
 * incrementals compare to find changes without reading content. Decimal strings: nanosecond times and inode
 * numbers exceed 2^53. Describes the source tree only; a restore never compares it.
 */
export const EntryStat = z.object({ ino: z.string(), dev: z.string(), mtimeNs: z.string(), ctimeNs: z.string() });
export type EntryStat = z.infer<typeof EntryStat>;

export const ManifestEntry = z.object({
  /** relative to the tree's root, '/'-separated; the root itself is not listed */
  path: z.string(),
  type: EntryType,
  /** permission bits (mode & 0o7777) */
  mode: z.number().int(),
  size: z.number().int(),
  /** seconds since the epoch, floored (what every format keeps: tar's pax records and erofs keep nanoseconds, squashfs does not) */
  mtime: z.number().int(),
  target: z.string().optional(),
  sha256: z.string().optional(),
  /** for the second and later names of a hard-linked file: the first name (in walk order) */
  link: z.string().optional(),
  /** numeric owner and group, as lstat (or the tar header) has them; absent in manifests made before owners were recorded */
  uid: z.number().int().optional(),
  gid: z.number().int().optional(),
  /** absent in manifests made before single-pass archives, and in manifests of restored trees */
  stat: EntryStat.optional(),
  /**
   * a sparse file: the bytes of it no data region covers (tar's sparse map, or the source's unallocated bytes). A
   * restore that keeps sparse files checks that at least half of them came back unallocated (tree-verify.ts).
   * Absent for dense files, and in manifests made before sparse files were recorded.
   */
  holes: z.number().int().positive().optional(),
});
export type ManifestEntry = z.infer<typeof ManifestEntry>;

export const ManifestTotals = z.object({ files: z.number(), dirs: z.number(), symlinks: z.number(), bytes: z.number() });

/**
 * What a backup leaves out (container/archive/selection.ts has the rules): glob `excludes` (the same meaning for every
 * format), git's ignore rules, directories tagged with a CACHEDIR.TAG. It travels to the agent in the
 * SELECTION_HEADER of every request a backup makes, so each walk of the tree (tar's list, an image's, a delta's, a
 * manifest's) leaves out the same entries.
 */
export const SELECTION_HEADER = "x-snapflow-selection";
export const SelectionSpec = z.object({
  excludes: z.array(z.string().min(1, "an exclude pattern is not empty").max(256, "an exclude pattern is at most 256 characters")
    .refine((p) => !p.startsWith("!"), "negated patterns are not supported (gitignore: true applies git's own rules, negations included)")
    .refine((p) => !p.includes("\0") && !/(^|\/)\.\.(\/|$)/.test(p), "a pattern names paths inside the tree: no NUL, no '..'")).max(64, "at most 64 exclude patterns").default([]),
  gitignore: z.boolean().default(false),
  excludeCaches: z.boolean().default(false),
}).strict();
export type SelectionSpec = z.infer<typeof SelectionSpec>;

/** What a manifest says of its selection: the rules, and how many top-level paths each left out. */
export const SelectionRecord = SelectionSpec.extend({
  /** by rule ("exclude <pattern>", "gitignore", "CACHEDIR.TAG"): the paths it excluded (a directory with all below it counts once) */
  excluded: z.record(z.string(), z.number()),
  warnings: z.array(z.string().max(1000)).max(100),
});
export type SelectionRecord = z.infer<typeof SelectionRecord>;

/** POST /v1/selection: compile a selection for a tree and answer its rules and warnings (the backup's probe asks). */
export const SelectionBody = z.object({ path: z.string(), selection: SelectionSpec }).strict();

/** Version 1 throughout: later fields are optional, so old manifests still parse and old readers ignore them. */
export const ManifestSchema = z.object({
  version: z.literal(1),
  entries: z.array(ManifestEntry),
  totals: ManifestTotals,
  /** a backup that left paths out: which rules, and how many each excluded (entries lists only what is in) */
  selection: SelectionRecord.optional(),
});
export type Manifest = z.infer<typeof ManifestSchema>;

/**
 * Version 2: a layer over a base snapshot's manifest, what an overlay delta stores, and a tar (changed-files) delta
 * too (archive/delta.ts deltaLayer: the entries that differ from the base's, its deletions as `removed`, no `opaque`;
 * its base may be a layer itself: ManifestSource's `under`). An overlay's lists only what the upper directory holds:
 * `entries` as the merged tree shows them (files hashed), `removed` the paths whose base entry and everything below it are gone (whiteouts), `opaque` the directories whose base contents are
 * all hidden. The tree's manifest is the base with the layer applied (manifest-layer.ts), made where it is read, so
 * a backup neither reads the base manifest nor walks the base image. `totals` are the whole tree's.
 */
export const LayerManifestSchema = z.object({
  version: z.literal(2),
  /** the snapshot whose manifest this layer applies to */
  base: z.string(),
  entries: z.array(ManifestEntry),
  removed: z.array(z.string()),
  opaque: z.array(z.string()),
  totals: ManifestTotals,
  /** a tar delta's selection (absent: the base's holds) */
  selection: SelectionRecord.optional(),
});
export type LayerManifest = z.infer<typeof LayerManifestSchema>;
