// The strategy registry: every way snapflow can move a workspace, as data. A strategy is
// format × path × materialization plus the tools it needs; the seeds' strategy names are presets of it, so
// our result tables line up with theirs row by row. Adding a preset is adding an entry here.
import type { ArchiveFormat, ErofsFormat, FilesFormat, ImageFormat, ProbeResult, SquashfsFormat, TarFormat, ToolName } from "../../container/contract/protocol.ts";
import { EVERY_STRATEGY, formatFidelity, restoreFidelity, type Fidelity } from "./fidelity.ts";

/** How archive bytes travel from the sandbox to the store. */
export type BackupPath =
  | "stream" // archive to a file in the sandbox, then its raw bytes → FixedLengthStream → single put
  | "multipart" // archive piped as the response body → equal-size parts → multipart from the Worker
  | "presigned-put" // archive to a file in the sandbox, then the agent PUTs it to a presigned URL (no Worker in the byte path)
  | "presigned-multipart" // the agent cuts the live tar stream into equal parts and PUTs them in parallel to presigned part URLs
  | "sdk-base64-chunked" // the seeds' baseline: split the staged archive, readFile each chunk as base64, decode, multipart
  | "sdk-base64-stream" // readFileStream: base64 in server-sent events, decoded in the Worker, multipart
  | "chunked" // the staged image cut into content-addressed chunks; the agent PUTs only the chunks the store lacks
  | "files" // the native engine chunks the files that changed since the sandbox's last snapshot and PUTs them as one pack in parts
  | "sdk-backup"; // the Sandbox SDK's own createBackup (squashfs made and uploaded by the SDK's container), then copied to the snapshot's key

/** How archive bytes travel from the store into the sandbox, and what becomes of them there. */
export type RestorePath =
  | "push-file" // store → Worker → agent request body → file, then extract
  | "push-pipe" // store → Worker → agent request body piped straight into the extractor
  | "presigned-file" // the agent GETs a presigned URL to a file, then extract
  | "presigned-pipe" // the agent GETs a presigned URL piped straight into the extractor
  | "presigned-ranged-file" // parallel Range GETs (the agent's own, or aria2c) into a file, then extract or mount
  | "presigned-ranged-pipe" // parallel Range GETs fed in order into the extractor
  | "sdk-restore"; // the Sandbox SDK's own restoreBackup: the image copied within the store to where the SDK reads it, then downloaded and mounted by the SDK's container

export interface BackupStrategy {
  name: string;
  kind: "backup";
  description: string;
  format: ArchiveFormat;
  path: BackupPath;
  /**
   * "changed-files": only what changed since `baseSnapshotId`, computed from the base's manifest;
   * "overlay-upper": the upper directory of the overlay mounted at `path` (made by overlay-restore of that base)
   */
  delta?: "changed-files" | "overlay-upper";
  requires: ToolName[];
  needs?: Capability[];
  /** the seed report this preset reproduces, when it is one of theirs */
  seed?: string;
  /** what a snapshot it makes cannot bring back, whatever restores it (fidelity.ts) */
  fidelity: Fidelity;
}

export interface RestoreStrategy {
  name: string;
  kind: "restore";
  description: string;
  /** restores snapshots of this format's family (tar+zstd of any level; any squashfs; …) */
  format: ArchiveFormat;
  path: RestorePath;
  /** what becomes of the bytes: extracted (tar: while they arrive on a pipe path), or an image mounted read-only */
  materialize: Materialize;
  /** presigned-ranged paths: who makes the Range GETs */
  downloader?: "node" | "aria2c";
  requires: ToolName[];
  needs?: Capability[];
  seed?: string;
  /** what this restore cannot bring back, of any snapshot (fidelity.ts; a pair adds its format's: pairFidelity) */
  fidelity: Fidelity;
}

/**
 * extract: tar x / unsquashfs / fsck.erofs --extract; mount-kernel and mount-fuse: the image mounted read-only
 * (kernel, or squashfuse without CAP_SYS_ADMIN); overlay: a squashfuse base under a writable overlayfs; lazy: a
 * chunked image mounted read-only before it is downloaded (snapflow-lazy's FUSE file, kernel squashfs over it or
 * squashfuse); lazy-overlay: that under a writable overlayfs.
 */
export type Materialize = "extract" | "mount-kernel" | "mount-fuse" | "overlay" | "lazy" | "lazy-overlay";

export type Strategy = BackupStrategy | RestoreStrategy;

const tar = (compression: TarFormat["compression"], level?: number): TarFormat => ({
  kind: "tar", compression, ...(level !== undefined ? { level } : {}), ...(compression === "zstd" ? { threads: 0 } : {}),
});
const plain = tar("none"), zstd3 = tar("zstd", 3), zstd1 = tar("zstd", 1), gzip6 = tar("gzip", 6), pigz6 = tar("pigz", 6), lz4 = tar("lz4", 1);

const toolsFor = (f: ArchiveFormat): ToolName[] =>
  f.kind === "tar" ? (f.compression === "none" ? ["tar"] : ["tar", f.compression as ToolName]) : f.kind === "squashfs" ? ["mksquashfs"] : f.kind === "files" ? ["snapflow-lazy"] : ["mkfs.erofs"];

const SEED_R2 = "r2-backup-restore-benchmark.md";
const SEED_003 = "snapshot-create-restore-benchmark.md";

const BACKUP_HOW: Record<BackupPath, string> = {
  stream: "archive to a file in the sandbox, then its raw bytes → FixedLengthStream → one put",
  multipart: "streamed as the agent's response → equal-size parts → multipart upload, bounded memory",
  "presigned-put": "archive to a file in the sandbox, then the agent PUTs it to a presigned URL",
  "presigned-multipart": "the agent cuts the live stream into equal parts and PUTs 4 at a time to presigned part URLs (no temp file, no Worker in the byte path)",
  "sdk-base64-chunked": "archive to a file, split into 10 MiB chunks, each read through the SDK file API as base64, decoded, multipart",
  "sdk-base64-stream": "archive to a file, read through the SDK's streaming file API (base64 events), decoded, multipart",
  chunked: "cut into content-defined chunks (FastCDC) stored by SHA-256; the agent PUTs only the chunks the store lacks over checksum-bound presigned URLs, and the snapshot is their index",
  files: "file by file: an unchanged file keeps its chunk list unread, a changed one is cut into FastCDC chunks, the new ones zstd-compressed into one pack PUT in parts to presigned URLs by the native engine; the snapshot is the compressed index",
  "sdk-backup": "made and uploaded by the Sandbox SDK's own createBackup (its container's mksquashfs, then its presigned, parallel multipart upload to the BACKUP_BUCKET binding's bucket), then copied by the Worker to the snapshot's key, hashed on the way; production only",
};
const RESTORE_HOW: Record<RestorePath, string> = {
  "push-file": "store → Worker → agent PUT to a file, then extract",
  "push-pipe": "store → Worker → agent PUT piped straight into the extractor (nothing staged)",
  "presigned-file": "the agent GETs a presigned URL to a file, then extract",
  "presigned-pipe": "the agent GETs a presigned URL piped straight into the extractor (no Worker in the byte path)",
  "presigned-ranged-file": "the agent makes 4 parallel Range GETs of a presigned URL into a file",
  "presigned-ranged-pipe": "the agent makes 4 parallel Range GETs of a presigned URL, fed in order into the extractor",
  "sdk-restore": "restored by the Sandbox SDK's own restoreBackup (the Worker copies the image, hashed, to where the SDK reads it; the SDK's container downloads it and mounts it at the target with squashfuse under a writable fuse-overlayfs); production only",
};
const MATERIALIZED: Record<Materialize, string> = {
  extract: "extracted",
  "mount-kernel": "mounted read-only by the kernel",
  "mount-fuse": "mounted read-only with squashfuse (no CAP_SYS_ADMIN)",
  overlay: "mounted with squashfuse as the lower layer of a writable overlayfs, with an overlay delta's upper directory extracted into its upper layer",
  lazy: "mounted read-only before it is downloaded: chunks fetched on first read over presigned GETs, verified, cached and prefetched (snapflow-lazy), the kernel's squashfs (or squashfuse) over them",
  "lazy-overlay": "mounted lazily (as lazy) as the lower layer of a writable overlayfs whose upper is on local disk",
};

interface BackupPreset {
  name: string;
  format: ArchiveFormat;
  path: BackupPath;
  /** the archiver, in words: "tar | zstd -3 -T0" */
  what: string;
  seed?: string;
  delta?: BackupStrategy["delta"];
}

function backup({ name, format, path, what, seed, delta }: BackupPreset): BackupStrategy {
  // The SDK's backup runs its own tools in its own container: what it needs is that container.
  if (path === "sdk-backup") return { name, kind: "backup", format, path, requires: [], needs: ["sdk"], description: `${what}, ${BACKUP_HOW[path]}`, fidelity: { ...EVERY_STRATEGY, ...formatFidelity(format) } };
  return { name, kind: "backup", format, path, requires: toolsFor(format), ...(seed ? { seed } : {}), ...(delta ? { delta } : {}), description: `${what}, ${BACKUP_HOW[path]}`, fidelity: { ...EVERY_STRATEGY, ...formatFidelity(format) } };
}

interface RestorePreset {
  name: string;
  format: ArchiveFormat;
  path: RestorePath;
  /** what the snapshot is, in words: "tar+zstd", "squashfs" */
  what: string;
  seed?: string;
  /** images: extract (the default) or mount; tar archives are always extracted */
  materialize?: Materialize;
  downloader?: RestoreStrategy["downloader"];
}

/**
 * Every extraction merges its staging directory into the target, and a delta's deletions are removed, by
 * snapflow-lazy's descriptor walk (container/extract/safe-merge.ts, safe-remove.ts): an extracting restore needs it.
 */
const MERGE: ToolName = "snapflow-lazy";

/** The tools an image restore needs beyond the download: its extractor, or squashfuse for FUSE mounts. */
function imageTools(format: ImageFormat, how: Materialize): ToolName[] {
  if (how === "extract") return [format.kind === "squashfs" ? "unsquashfs" : "fsck.erofs", MERGE];
  // Lazy: the helper and fusermount3 always; the image over it is the kernel's when it may mount, else squashfuse
  // (the agent picks; without either the mount fails naming what is missing).
  if (how === "lazy" || how === "lazy-overlay" || (how === "overlay" && format.kind === "squashfs" && format.chunks)) return ["snapflow-lazy", "fusermount3"];
  return how === "mount-kernel" ? [] : ["squashfuse", "fusermount3"];
}
const NEEDS: Record<Materialize, (f: ImageFormat) => Capability[]> = {
  extract: () => [],
  "mount-kernel": (f) => ["cap_sys_admin", `fs:${f.kind}`],
  "mount-fuse": () => ["fuse"],
  overlay: () => ["fuse", "cap_sys_admin", "fs:overlay"],
  lazy: () => ["fuse"],
  "lazy-overlay": () => ["fuse", "cap_sys_admin", "fs:overlay"],
};

function restore({ name, format, path, what, seed, materialize = "extract", downloader }: RestorePreset): RestoreStrategy {
  const common = { name, kind: "restore" as const, format, path, ...(seed ? { seed } : {}), ...(downloader ? { downloader } : {}) };
  // The SDK's restore runs its own tools in its own container (a FUSE mount): what it needs is that container.
  if (path === "sdk-restore" && format.kind === "squashfs") {
    return { ...common, materialize: "mount-fuse", requires: [], needs: ["sdk"], description: `${what}: ${RESTORE_HOW[path]}`, fidelity: restoreFidelity(format, "mount-fuse") };
  }
  const aria2c: ToolName[] = downloader === "aria2c" ? ["aria2c"] : [];
  // The file-level format: the index is brought, then the native engine makes the tree from the packs it names.
  if (format.kind === "files") {
    // Or served lazily from its index (files-mount) as the read-only base of a writable overlay: a sleep/wake chain's.
    if (materialize === "overlay") {
      return { ...common, materialize, requires: ["snapflow-lazy", "fusermount3"], needs: ["fuse", "cap_sys_admin", "fs:overlay"], description: `${what}: ${RESTORE_HOW[path]}, then its tree served read-only from it (snapflow-lazy files-mount: chunks fetched by Range GETs of their packs on first read, checked, cached and prefetched) as the lower layer of a writable overlayfs, each overlay delta of the chain extracted into a layer over it`, fidelity: restoreFidelity(format, materialize) };
    }
    return { ...common, materialize, requires: ["snapflow-lazy"], description: `${what}: ${RESTORE_HOW[path]}, then the tree made from its packs by Range GETs, every chunk checked (snapflow-lazy files-unpack)`, fidelity: restoreFidelity(format, materialize) };
  }
  if (format.kind === "tar") {
    return { ...common, materialize: "extract", requires: [...aria2c, ...toolsFor(format), MERGE], description: `${what}: ${RESTORE_HOW[path]}`, fidelity: restoreFidelity(format, "extract") };
  }
  // Images: fetched to a file, then extracted or mounted.
  return {
    ...common, materialize, requires: [...aria2c, ...imageTools(format, materialize)], needs: NEEDS[materialize](format),
    description: `${what}: ${RESTORE_HOW[path]}, ${MATERIALIZED[materialize]}`,
    fidelity: restoreFidelity(format, materialize),
  };
}

const squashfs = (compression: SquashfsFormat["compression"], level?: number): SquashfsFormat => ({ kind: "squashfs", compression, ...(level ? { level } : {}) });
const erofs = (compression: ErofsFormat["compression"]): ErofsFormat => ({ kind: "erofs", compression });
/**
 * The chunked format: squashfs zstd 3 cut at 512 KiB on average — the one average that met both the completion
 * target (1.1× download-then-mount) and a small first use (2.1% of the image) in native/lazy/MEASUREMENTS.md.
 */
export const CHUNK_AVG = 512 * 1024;
/**
 * The file-level format: 1 MiB average chunks (restic's), zstd 3 per chunk. Most files of a node_modules tree are far
 * smaller than a chunk and make one chunk each; the average only decides how a large file is cut.
 */
export const filesFormat: FilesFormat = { kind: "files", avgChunk: 1 << 20, level: 3 };
const chunkedSquashfs: SquashfsFormat = { ...squashfs("zstd", 3), chunks: { avg: CHUNK_AVG } };

export const STRATEGIES: readonly Strategy[] = [
  // r2-backup-restore-benchmark.md / r2-backup-benchmark-local.md backups
  backup({ name: "tar-zst-direct", format: zstd3, path: "stream", what: "tar | zstd -3 -T0", seed: SEED_R2 }),
  backup({ name: "tar-zst-fast-direct", format: zstd1, path: "stream", what: "tar | zstd -1 -T0", seed: SEED_R2 }),
  backup({ name: "tar-direct", format: plain, path: "stream", what: "plain tar", seed: SEED_R2 }),
  backup({ name: "tar-gz-direct", format: gzip6, path: "stream", what: "tar | gzip -6", seed: SEED_R2 }),
  backup({ name: "tar-zst-fast-chunked", format: zstd1, path: "sdk-base64-chunked", what: "tar | zstd -1 -T0", seed: SEED_R2 }),
  backup({ name: "tar-zst-stream", format: zstd3, path: "sdk-base64-stream", what: "tar | zstd -3 -T0", seed: SEED_R2 }),
  backup({ name: "tar-zst-pipe", format: zstd3, path: "multipart", what: "tar | zstd -3 -T0", seed: SEED_R2 }),
  backup({ name: "tar-zst-long-pipe", format: { ...zstd3, long: true }, path: "multipart", what: "tar | zstd -3 -T0 --long=27 (a 128 MiB match window)" }),
  backup({ name: "tar-zst-fast-pipe", format: zstd1, path: "multipart", what: "tar | zstd -1 -T0", seed: SEED_R2 }),
  backup({ name: "tar-pipe", format: plain, path: "multipart", what: "plain tar", seed: SEED_R2 }),
  // snapshot-create-restore-benchmark.md techniques ("file" = temp file then upload, "stream" = no temp file)
  backup({ name: "pigz-file", format: pigz6, path: "stream", what: "tar | pigz", seed: SEED_003 }),
  backup({ name: "zstd-file", format: zstd3, path: "stream", what: "tar | zstd -T0", seed: SEED_003 }),
  backup({ name: "lz4-file", format: lz4, path: "stream", what: "tar | lz4", seed: SEED_003 }),
  backup({ name: "pigz-stream", format: pigz6, path: "multipart", what: "tar | pigz", seed: SEED_003 }),
  backup({ name: "zstd-stream", format: zstd3, path: "multipart", what: "tar | zstd -T0", seed: SEED_003 }),
  backup({ name: "lz4-stream", format: lz4, path: "multipart", what: "tar | lz4" }),
  backup({ name: "tar-zst-presigned", format: zstd3, path: "presigned-put", what: "tar | zstd -3 -T0" }),
  // images (mksquashfs and mkfs.erofs cannot write to a pipe: always staged)
  backup({ name: "squashfs-zstd", format: squashfs("zstd"), path: "stream", what: "mksquashfs -comp zstd at its default level (15), as the seed did", seed: SEED_R2 }),
  backup({ name: "squashfs-zstd-3", format: squashfs("zstd", 3), path: "stream", what: "mksquashfs -comp zstd -Xcompression-level 3" }),
  backup({ name: "squashfs-lz4", format: squashfs("lz4"), path: "stream", what: "mksquashfs -comp lz4", seed: SEED_R2 }),
  backup({ name: "squashfs-lzo", format: squashfs("lzo"), path: "stream", what: "mksquashfs -comp lzo", seed: SEED_R2 }),
  backup({ name: "squashfs-gzip", format: squashfs("gzip"), path: "stream", what: "mksquashfs -comp gzip" }),
  backup({ name: "squashfs-zstd-3-1m", format: { ...squashfs("zstd", 3), blockSize: 1 << 20 }, path: "stream", what: "mksquashfs -comp zstd level 3, 1 MiB blocks" }),
  backup({ name: "tar-zst-presigned-multipart", format: zstd3, path: "presigned-multipart", what: "tar | zstd -3 -T0" }),
  backup({ name: "squashfs-zstd-3-presigned", format: squashfs("zstd", 3), path: "presigned-put", what: "mksquashfs -comp zstd level 3" }),
  backup({ name: "erofs-lz4", format: erofs("lz4"), path: "stream", what: "mkfs.erofs -zlz4" }),
  backup({ name: "erofs-lz4hc", format: erofs("lz4hc"), path: "stream", what: "mkfs.erofs -zlz4hc" }),
  backup({ name: "erofs", format: erofs("none"), path: "stream", what: "mkfs.erofs, uncompressed" }),
  backup({ name: "squashfs-chunked", format: chunkedSquashfs, path: "chunked", what: "mksquashfs -comp zstd level 3" }),
  backup({ name: "files-cas", format: filesFormat, path: "files", what: "the file-level content-addressed format (snapflow-lazy files-pack), deduplicated against the sandbox's last snapshot" }),
  backup({ name: "overlay-delta", format: zstd3, path: "multipart", what: "the upper directory of the workspace's overlay (what changed over its base image), tar | zstd -3 -T0", seed: SEED_R2, delta: "overlay-upper" }),
  // A sleep's delta is small: staged in the sandbox and PUT once, bound to its SHA-256, rather than relayed by the Worker.
  backup({ name: "overlay-delta-put", format: zstd3, path: "presigned-put", what: "the upper directory of the workspace's overlay, tar | zstd -3 -T0 staged in the sandbox and PUT once to a presigned URL (no byte through the Worker)", delta: "overlay-upper" }),
  // The default's incremental: made by the engine from its kept base and PUT in parts by it, as the default is.
  backup({ name: "tar-zst-delta", format: zstd3, path: "presigned-multipart", what: "the files changed since a base snapshot (from its manifest), tar | zstd -3 -T0, PUT in parts by the sandbox (no byte through the Worker)", delta: "changed-files" }),
  // The SDK's own backup (its default: squashfs, lz4), measured like every preset; restored by the squashfs presets.
  backup({ name: "sdk-backup", format: squashfs("lz4"), path: "sdk-backup", what: "the Sandbox SDK's createBackup (squashfs, lz4, its defaults)" }),

  // restores: one staged and one piped per archive family
  restore({ name: "restore-tar", format: plain, path: "push-file", what: "plain tar", seed: SEED_R2 }),
  restore({ name: "restore-tar-pipe", format: plain, path: "push-pipe", what: "plain tar" }),
  restore({ name: "restore-tar-zst", format: zstd3, path: "push-file", what: "tar+zstd", seed: SEED_R2 }),
  restore({ name: "restore-tar-zst-pipe", format: zstd3, path: "push-pipe", what: "tar+zstd", seed: SEED_R2 }),
  restore({ name: "presigned-tar-zst-pipe", format: zstd3, path: "presigned-pipe", what: "tar+zstd", seed: SEED_R2 }),
  restore({ name: "presigned-tar-zst1-pipe", format: zstd1, path: "presigned-pipe", what: "tar+zstd (a zstd -1 archive in the seed)", seed: SEED_R2 }),
  restore({ name: "presigned-tar-zst", format: zstd3, path: "presigned-file", what: "tar+zstd", seed: SEED_R2 }),
  restore({ name: "presigned-tar-zst-ranged-pipe", format: zstd3, path: "presigned-ranged-pipe", what: "tar+zstd" }),
  restore({ name: "presigned-tar-zst-ranged", format: zstd3, path: "presigned-ranged-file", what: "tar+zstd" }),
  restore({ name: "presigned-tar-zst-aria2c", format: zstd3, path: "presigned-ranged-file", what: "tar+zstd, aria2c with 4 connections", downloader: "aria2c" }),
  restore({ name: "restore-tar-gz", format: gzip6, path: "push-file", what: "tar+gzip", seed: SEED_R2 }),
  restore({ name: "restore-tar-gz-pipe", format: gzip6, path: "push-pipe", what: "tar+gzip" }),
  restore({ name: "restore-tar-lz4", format: lz4, path: "push-file", what: "tar+lz4" }),
  restore({ name: "restore-tar-lz4-pipe", format: lz4, path: "push-pipe", what: "tar+lz4" }),

  restore({ name: "presigned-squashfs-mount", format: squashfs("zstd"), path: "presigned-file", what: "squashfs", seed: SEED_R2, materialize: "mount-kernel" }),
  restore({ name: "presigned-squashfuse-mount", format: squashfs("zstd"), path: "presigned-file", what: "squashfs", seed: SEED_R2, materialize: "mount-fuse" }),
  restore({ name: "presigned-squashfs-mount-aria2c", format: squashfs("zstd"), path: "presigned-ranged-file", what: "squashfs, aria2c with 4 connections", seed: SEED_R2, materialize: "mount-kernel", downloader: "aria2c" }),
  restore({ name: "presigned-squashfs-lz4-mount-aria2c", format: squashfs("lz4"), path: "presigned-ranged-file", what: "squashfs (lz4 in the seed), aria2c with 4 connections", seed: SEED_R2, materialize: "mount-kernel", downloader: "aria2c" }),
  restore({ name: "presigned-squashfs-lz4-mount", format: squashfs("lz4"), path: "presigned-file", what: "squashfs (lz4 in the seed)", seed: SEED_R2, materialize: "mount-kernel" }),
  restore({ name: "presigned-squashfs-extract", format: squashfs("zstd"), path: "presigned-file", what: "squashfs", seed: SEED_R2, materialize: "extract" }),
  restore({ name: "restore-squashfs-mount", format: squashfs("zstd"), path: "push-file", what: "squashfs", seed: SEED_R2, materialize: "mount-kernel" }),
  restore({ name: "restore-squashfs-extract", format: squashfs("zstd"), path: "push-file", what: "squashfs", seed: SEED_R2, materialize: "extract" }),
  restore({ name: "overlay-restore", format: squashfs("zstd"), path: "presigned-file", what: "squashfs base (+ an overlay-delta)", seed: SEED_R2, materialize: "overlay" }),
  restore({ name: "presigned-erofs-mount", format: erofs("lz4"), path: "presigned-file", what: "erofs", materialize: "mount-kernel" }),
  restore({ name: "presigned-erofs-extract", format: erofs("lz4"), path: "presigned-file", what: "erofs", materialize: "extract" }),
  // chunked snapshots: the index is what the transfer brings (presigned GET, hash-checked); the chunks follow lazily
  restore({ name: "lazy-squashfs", format: chunkedSquashfs, path: "presigned-file", what: "chunked squashfs (the index)", materialize: "lazy" }),
  restore({ name: "lazy-squashfs-overlay", format: chunkedSquashfs, path: "presigned-file", what: "chunked squashfs (the index)", materialize: "lazy-overlay" }),
  // forks: a chunked base mounted lazily under a writable overlay, with an overlay-delta's upper extracted into it
  restore({ name: "lazy-overlay-restore", format: chunkedSquashfs, path: "presigned-file", what: "chunked squashfs base, mounted lazily (+ an overlay-delta)", materialize: "overlay" }),
  // the file-level format: the index brought (presigned GET, hash-checked), the tree made from the packs it names
  restore({ name: "files-extract", format: filesFormat, path: "presigned-file", what: "the file-level index" }),
  // sleep/wake over the file-level format: its tree served lazily from the index, a chain's deltas laid over it
  restore({ name: "files-overlay-restore", format: filesFormat, path: "presigned-file", what: "the file-level index (+ an overlay-delta)", materialize: "overlay" }),
  // The SDK's own restore, measured like every preset (any squashfs snapshot: sdk-backup's, or ours). Last of the
  // squashfs restores, so that it is never the default one.
  restore({ name: "sdk-restore", format: squashfs("lz4"), path: "sdk-restore", what: "squashfs" }),
];

/**
 * The default backup: tar + zstd -3 made by the native engine, which PUTs its own parts to presigned URLs (no byte
 * through the Worker or the agent; presigned-multipart.ts). tar-zst-pipe stays as the seeds measured it (the Worker
 * relays the archive as multipart).
 */
export const DEFAULT_BACKUP = "tar-zst-presigned-multipart";

/** Refuses a registry with two entries of one name: a lookup would silently find only the first. */
export function checkUniqueNames(strategies: readonly Strategy[]): void {
  const seen = new Set<string>();
  for (const s of strategies) {
    if (seen.has(s.name)) throw new Error(`strategy registry: the name ${s.name} is used twice`);
    seen.add(s.name);
  }
}
checkUniqueNames(STRATEGIES);

export function findStrategy(name: string): Strategy | undefined {
  return STRATEGIES.find((s) => s.name === name);
}

/** The backup preset of that name, typed as one (undefined for a restore preset or an unknown name). */
export function findBackup(name: string): BackupStrategy | undefined {
  const s = findStrategy(name);
  return s?.kind === "backup" ? s : undefined;
}

/** The restore preset of that name, typed as one (undefined for a backup preset or an unknown name). */
export function findRestore(name: string): RestoreStrategy | undefined {
  const s = findStrategy(name);
  return s?.kind === "restore" ? s : undefined;
}

/**
 * Which restores can read an archive: tar by compressor (gzip and pigz write the same format), images by kind
 * (unsquashfs, the kernel and squashfuse read every squashfs compressor).
 */
export function archiveFamily(format: ArchiveFormat): string {
  // A chunked snapshot's stored object is an index, not an image: only the lazy restores read it, and they read
  // nothing else. Chunks cut at another average are still read the same way (the index says where each one is).
  if (format.kind === "squashfs" && format.chunks) return "squashfs+chunks";
  if (format.kind !== "tar") return format.kind;
  return format.compression === "pigz" ? "gzip" : format.compression;
}

/** A short name of a format for messages: "tar+zstd", "squashfs+lz4". */
export function formatName(format: ArchiveFormat): string {
  if (format.kind === "squashfs" && format.chunks) return `squashfs+${format.compression} in chunks`;
  if (format.kind === "files") return "the file-level format";
  return format.compression === "none" ? format.kind : `${format.kind}+${format.compression}`;
}

export const isImage = (f: ArchiveFormat): f is ImageFormat => f.kind === "squashfs" || f.kind === "erofs";

/** Restore strategies that can read a snapshot made with `format`. */
export function restoresFor(format: ArchiveFormat): RestoreStrategy[] {
  return STRATEGIES.filter((s): s is RestoreStrategy => s.kind === "restore" && archiveFamily(s.format) === archiveFamily(format));
}

/**
 * Restore strategies that can restore a snapshot, deltas included (they need a pipe, or the overlay: the one that
 * mounts the delta's base, `baseFormat`, whole or lazily).
 */
export function restoresForSnapshot(snapshot: { format: ArchiveFormat; delta?: { kind: string } }, baseFormat?: ArchiveFormat): RestoreStrategy[] {
  const restores = STRATEGIES.filter((s): s is RestoreStrategy => s.kind === "restore");
  if (snapshot.delta?.kind === "overlay-upper") return restores.filter((s) => s.materialize === "overlay" && (!baseFormat || archiveFamily(s.format) === archiveFamily(baseFormat)));
  const fits = restoresFor(snapshot.format);
  return snapshot.delta ? fits.filter((s) => s.path.endsWith("-pipe")) : fits;
}

/** What a strategy needs of the sandbox beyond tools; "sdk": a Sandbox SDK container (SANDBOX_TRANSPORT=sandbox). */
export type Capability = "fuse" | "cap_sys_admin" | "fs:squashfs" | "fs:erofs" | "fs:overlay" | "sdk";

/**
 * The oldest version of a tool whose flags snapflow passes (container/images/image-argv.ts): erofs-utils 1.5 brought
 * fsck.erofs --extract and mkfs.erofs --preserve-mtime (its changelog). Ubuntu 22.04, the SDK's base image, ships
 * 1.4: there the erofs presets are unavailable, named as such, rather than failing mid-run on an unknown option.
 */
export const TOOL_MINIMUMS: Partial<Record<ToolName, { version: string; why: string }>> = {
  "mkfs.erofs": { version: "1.5", why: "--preserve-mtime" },
  "fsck.erofs": { version: "1.5", why: "--extract" },
};

/** Dotted versions compared numerically ("1.10" > "1.5"); a version that does not parse is taken as too old. */
export function versionAtLeast(version: string, minimum: string): boolean {
  if (!/^\d+(\.\d+)*$/.test(version)) return false;
  const [a, b] = [version, minimum].map((v) => v.split(".").map(Number));
  for (let i = 0; i < Math.max(a!.length, b!.length); i++) {
    const d = (a![i] ?? 0) - (b![i] ?? 0);
    if (d) return d > 0;
  }
  return true;
}

/**
 * Why a strategy cannot run in a sandbox as probed, or undefined when it can. `transport`: how this Worker reaches
 * its sandboxes (the SDK's own backup needs an SDK container); absent, "sdk" needs are not judged.
 */
export function unavailableReason(s: Strategy, probe: Pick<ProbeResult, "tools" | "fuse" | "capSysAdmin" | "filesystems">, transport?: "sandbox" | "local"): string | undefined {
  const reasons: string[] = [];
  const missing = s.requires.filter((t) => !probe.tools[t]);
  if (missing.length) reasons.push(`missing tool${missing.length > 1 ? "s" : ""}: ${missing.join(", ")}`);
  for (const t of s.requires) {
    const min = TOOL_MINIMUMS[t], have = probe.tools[t]?.version;
    if (min && have && !versionAtLeast(have, min.version)) reasons.push(`${t} ${have} is older than ${min.version} (the preset passes ${min.why})`);
  }
  for (const need of s.needs ?? []) {
    if (need === "sdk" && transport === "local") reasons.push("it runs in a Sandbox SDK container, and this Worker's sandboxes are the local transport's host agent (SANDBOX_TRANSPORT=local): production only");
    if (need === "fuse" && !probe.fuse) reasons.push("no /dev/fuse");
    if (need === "cap_sys_admin" && !probe.capSysAdmin) reasons.push("no CAP_SYS_ADMIN (kernel mounts need it)");
    if (need.startsWith("fs:") && !probe.filesystems.includes(need.slice(3))) reasons.push(`the kernel has no ${need.slice(3)} filesystem`);
  }
  return reasons.length ? reasons.join("; ") : undefined;
}
