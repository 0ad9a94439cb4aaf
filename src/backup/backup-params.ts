// What a backup is asked to do (the BackupWorkflow's params) and what its phases hand each other.
import type { WakeOverlay } from "../snapshots/files-lineage.ts";
import type { ChunkRecord, FilesRecord, ManifestFromIndex, StepResult } from "../snapshots/records.ts";
import type { Labels } from "../snapshots/snapshot-meta.ts";

export interface BackupParams {
  snapshotId: string;
  sandboxId: string;
  path: string;
  strategy: string;
  /** whose chunks this backup dedups against and writes (chunk-keys.ts); absent: the default tenant (runs from before tenants) */
  tenant?: string;
  /** delta strategies: the snapshot this one applies on top of */
  baseSnapshotId?: string;
  /** a compaction (workflows/compact-workflow.ts): the overlay delta whose tree, woken and verified, this backup is */
  compacts?: string;
  /**
   * a compaction of a file-level chain: its wake laid this many deltas over the base's index (baseSnapshotId), whose
   * layer directories are all the backup reads (filecas lower.go)
   */
  compactLayers?: number;
  /** an overlay delta: compact its chain once it lies this many deltas over its image or compaction (absent: the default) */
  compactAfter?: number;
  /** drop the page cache in the probe step (cold-cache runs) */
  dropCaches?: boolean;
  /** multipart paths: part size and parts in flight */
  tuning?: { partSizeMiB?: number; concurrency?: number; partUrlExpirySeconds?: number };
  /** when the API accepted the request (progress shows it) */
  startedAt?: string;
  name?: string;
  labels?: Labels;
  /** time to live in seconds, counted from the record step */
  ttl?: number;
  /** what the backup leaves out (selection.ts): glob patterns, git's ignore rules, CACHEDIR.TAG directories */
  excludes?: string[];
  gitignore?: boolean;
  excludeCaches?: boolean;
  /** an image's content check after its record (src/restore/background-check.ts); absent: IMAGE_CONTENT_CHECK's */
  contentCheck?: "background" | "off";
}

export interface ArchiveResult extends StepResult {
  sha256?: string;
  staged?: string;
  /** a delta: the list of changed entries in the sandbox, and what it holds */
  delta?: { list: string; changed: number; deleted: number; changedBytes: number };
  /** an overlay delta: the upper directory archived instead of `path`, and the chain it lays over (overlay-chain.ts) */
  archiveRoot?: string;
  chain?: string[];
  /** absent when the manifest is made during transfer (a single-pass streaming backup): the transfer has it */
  manifest?: ManifestTotals;
  /** the archive is made in one read of the source during transfer, which then stores the manifest */
  singlePass?: boolean;
}

export interface ManifestTotals {
  files: number;
  dirs: number;
  symlinks: number;
  bytes: number;
  manifestBytes: number;
  /** the walk (single pass: the metadata walk that named tar's entries; else the hashing walk) */
  ms: number;
  storeMs?: number;
  /** the record keeps these: the stored manifest's SHA-256 (the store checked it), and the snapshot it is a layer over */
  sha256?: string;
  layerOf?: string;
  /** a file-level snapshot's: made from its index, not stored (records.ts) */
  fromIndex?: ManifestFromIndex;
  /** beside a layer: the SHA-256 of the whole tree's manifest the sandbox keeps (the next delta's base, manifest-kept.ts) */
  treeSha256?: string;
}

export interface TransferResult extends StepResult {
  sha256: string;
  /** a single-pass streaming backup: the manifest made on the way, and what a delta held */
  manifest?: ManifestTotals;
  delta?: ArchiveResult["delta"];
  ttfbMs?: number;
  parts?: number;
  /** relayed through the Worker: the reads its upload made of the archive stream (one per 256 KiB block) */
  reads?: number;
  /**
   * The SHA-256 checksum the store checked and must keep for the object (presigned multipart: the composite of
   * the part hashes the completion listed, part-checksums.ts); verify reads it back from the store.
   */
  storeChecksum?: string;
  /** a chunked backup: the image, its chunks, and what this backup had to upload of them */
  chunks?: ChunkedTransfer;
  /** a file-level backup: the packs its index names and what it read and stored */
  files?: FilesRecord;
  /** a file-level backup of a wake's overlay that read only its layers (files.ts): the wake, kept in the lineage */
  overWake?: WakeOverlay;
}

/** What the record keeps of a chunked transfer (ChunkRecord), and its timings. */
export interface ChunkedTransfer extends ChunkRecord {
  indexMs: number;
  findMs: number;
  uploadMs: number;
  uploadRetries: number;
  /** the chunks found bad in the store (the first 20), uploaded again */
  badChunks?: string[];
  /** how each reused chunk was checked: the store's checksum, the Worker's own hash, or its size only (missing-chunks.ts) */
  reusedVerified: number;
  rehashed: number;
  unverified: number;
}
