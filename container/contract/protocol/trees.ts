// Comparing a tree with a manifest (POST /v1/verify, /v1/verify-tree) and where an expected manifest comes from.
// Part of the agent's protocol (../protocol.ts re-exports every part): both sides import it.
import { z } from "zod";
import { ManifestSchema, SelectionRecord } from "./manifest.ts";

export const VerifyBody = z.object({ path: z.string(), expected: ManifestSchema, limit: z.number().int().positive().max(1000).default(20) });

/**
 * A restore's "unless asked": give entries the owners (numeric uid/gid) and setuid/setgid bits the archive holds.
 * Off, they go to the agent's user and the bits are cleared (container/extract/sanitize-extracted.ts). Device nodes go
 * either way.
 */
export const Ownership = { keepOwnership: z.boolean().optional() };

export const Sha256Hex = z.string().regex(/^[0-9a-f]{64}$/, "a SHA-256 in lowercase hex");
/** A stored manifest: its presigned GET, and its SHA-256 when the snapshot's record keeps one (checked on arrival). */
export const StoredManifest = z.object({ url: z.string(), sha256: Sha256Hex.optional() }).strict();

/**
 * The longest chain of overlay deltas over one image (an overlay delta of an overlay delta…: a workspace slept and
 * woken again). Why 32: a wake downloads and extracts every delta of the chain before the tree answers, so its cost
 * grows with the chain's sum of changes (32 cycles of 10 MB: 320 MB, a third of the npm workspace's image), and its
 * verify fetches and applies each layer manifest in turn; the kernel's own bounds are far off (500 lower layers, and
 * the layers are named relative to their shared directory in one page of mount options). Past it a workspace is
 * backed up whole again (compaction, not built yet: docs/lifecycle.md).
 */
export const MAX_OVERLAY_CHAIN = 32;

/**
 * A file-level index's chain (native/lazy/internal/filecas/layer.go): an incremental stores its index as a layer over
 * its parent's, so a snapshot's index is its own object over these, the whole index first (each a presigned GET on
 * the store's origin, and the SHA-256 the layer above it names). At most FILES_MAX_DEPTH (filecas.MaxDepth).
 */
export const FILES_MAX_DEPTH = 8;
export const IndexChain = z.array(z.object({ url: z.string(), sha256: Sha256Hex }).strict()).max(FILES_MAX_DEPTH);

/**
 * A manifest the agent reads itself: a file in the sandbox, or the store over a presigned GET (the Worker stays out
 * of the byte path). A layer (version 2) comes with its base's manifest, which the agent applies it to, and, in a
 * chain of overlay deltas, with the layers between (`under`, oldest first), applied to the base before it.
 */
/**
 * A file-level snapshot's manifest, which is not stored: its index holds every entry, and the native engine makes the
 * manifest from it (`snapflow-lazy files-manifest`), byte for byte what the backup made, so it is checked against the
 * SHA-256 the record keeps (`sha256`). `index`: the index's presigned GET and its record's SHA-256; `selection`: the
 * selection record the backup's manifest held (the index does not).
 */
export const IndexManifest = z.object({
  index: z.object({ url: z.string(), sha256: Sha256Hex, chain: IndexChain.optional() }).strict(),
  sha256: Sha256Hex,
  selection: SelectionRecord.optional(),
}).strict();
export type IndexManifest = z.infer<typeof IndexManifest>;

export const ManifestSource = z.union([
  z.object({ file: z.string() }).strict(),
  IndexManifest,
  StoredManifest.extend({ base: z.union([StoredManifest, IndexManifest]).optional(), under: z.array(StoredManifest).max(MAX_OVERLAY_CHAIN - 1).optional() }).strict(),
]);
export type ManifestSource = z.infer<typeof ManifestSource>;

export const VerifyTreeBody = z.object({
  path: z.string(),
  expected: ManifestSource,
  /** hash every file as well (today's /v1/verify); default: metadata only */
  deep: z.boolean().default(false),
  /**
   * deep, without reading a file again: each file's SHA-256 is taken from this manifest, one made of this very tree
   * by a single pass that read every byte once (a compaction's image: its hashes are of what went into it)
   */
  hashes: ManifestSource.optional(),
  /**
   * false (with `hashes`): the tree is not walked again; `hashes` is its own manifest, made moments ago in this
   * sandbox by the single pass that walked it and read every byte (a compaction's), and its entries are compared as
   * the walk's would be
   */
  walk: z.boolean().default(true),
  /** the restore kept owners and set-id bits: compare them too (else set-id bits are left out of the mode) */
  ...Ownership,
  /** compare sparse files' holes (tree-verify.ts); false where the materialization cannot show them */
  sparse: z.boolean().default(true),
  limit: z.number().int().positive().max(1000).default(20),
});

/** What a restore checks while extracting: the expected manifest, and whether this archive holds all of it. */
export const ExtractExpectation = {
  expected: ManifestSource.optional(),
  /** false for a delta layer: check only the entries it holds (default true) */
  complete: z.boolean().optional(),
  /** walk the result and compare metadata (default: = complete; a chain walks after its last layer) */
  walk: z.boolean().optional(),
};
