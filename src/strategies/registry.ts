// The strategy registry: every way snapflow can move a workspace, as data. A strategy is
// format × path × materialization plus the tools it needs; the seeds' strategy names are presets of it, so
// our result tables line up with theirs row by row. Adding a preset is adding an entry here.
import type { ArchiveFormat, ErofsFormat, ImageFormat, ProbeResult, SquashfsFormat, TarFormat, ToolName } from "../../container/protocol.ts";

/** How archive bytes travel from the sandbox to the store. */
export type BackupPath =
  | "stream" // archive to a file in the sandbox, then its raw bytes → FixedLengthStream → single put
  | "multipart" // archive piped as the response body → equal-size parts → multipart from the Worker
  | "presigned-put" // archive to a file in the sandbox, then the agent PUTs it to a presigned URL (no Worker in the byte path)
  | "presigned-multipart" // the agent cuts the live tar stream into equal parts and PUTs them in parallel to presigned part URLs
  | "sdk-base64-chunked" // the seeds' baseline: split the staged archive, readFile each chunk as base64, decode, multipart
  | "sdk-base64-stream"; // readFileStream: base64 in server-sent events, decoded in the Worker, multipart

/** How archive bytes travel from the store into the sandbox, and what becomes of them there. */
export type RestorePath =
  | "push-file" // store → Worker → agent request body → file, then extract
  | "push-pipe" // store → Worker → agent request body piped straight into the extractor
  | "presigned-file" // the agent GETs a presigned URL to a file, then extract
  | "presigned-pipe" // the agent GETs a presigned URL piped straight into the extractor
  | "presigned-ranged-file" // parallel Range GETs (the agent's own, or aria2c) into a file, then extract or mount
  | "presigned-ranged-pipe"; // parallel Range GETs fed in order into the extractor

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
}

export interface RestoreStrategy {
  name: string;
  kind: "restore";
  description: string;
  /** restores snapshots of this format's family (tar+zstd of any level; any squashfs; …) */
  format: ArchiveFormat;
  path: RestorePath;
  /** images only: extract them, or mount them read-only (kernel, or FUSE without CAP_SYS_ADMIN) */
  materialize?: "extract" | "mount-kernel" | "mount-fuse" | "overlay";
  /** presigned-ranged paths: who makes the Range GETs */
  downloader?: "node" | "aria2c";
  requires: ToolName[];
  needs?: Capability[];
  seed?: string;
}

export type Strategy = BackupStrategy | RestoreStrategy;

const tar = (compression: TarFormat["compression"], level?: number): TarFormat => ({
  kind: "tar", compression, ...(level !== undefined ? { level } : {}), ...(compression === "zstd" ? { threads: 0 } : {}),
});
const plain = tar("none"), zstd3 = tar("zstd", 3), zstd1 = tar("zstd", 1), gzip6 = tar("gzip", 6), pigz6 = tar("pigz", 6), lz4 = tar("lz4", 1);

const toolsFor = (f: ArchiveFormat): ToolName[] =>
  f.kind === "tar" ? (f.compression === "none" ? ["tar"] : ["tar", f.compression as ToolName]) : f.kind === "squashfs" ? ["mksquashfs"] : ["mkfs.erofs"];

const SEED_R2 = "r2-backup-restore-benchmark.md";
const SEED_003 = "snapshot-create-restore-benchmark.md";

const BACKUP_HOW: Record<BackupPath, string> = {
  stream: "archive to a file in the sandbox, then its raw bytes → FixedLengthStream → one put",
  multipart: "streamed as the agent's response → equal-size parts → multipart upload, bounded memory",
  "presigned-put": "archive to a file in the sandbox, then the agent PUTs it to a presigned URL",
  "presigned-multipart": "the agent cuts the live stream into equal parts and PUTs 4 at a time to presigned part URLs (no temp file, no Worker in the byte path)",
  "sdk-base64-chunked": "archive to a file, split into 10 MiB chunks, each read through the SDK file API as base64, decoded, multipart",
  "sdk-base64-stream": "archive to a file, read through the SDK's streaming file API (base64 events), decoded, multipart",
};
const RESTORE_HOW: Record<RestorePath, string> = {
  "push-file": "store → Worker → agent PUT to a file, then extract",
  "push-pipe": "store → Worker → agent PUT piped straight into the extractor (nothing staged)",
  "presigned-file": "the agent GETs a presigned URL to a file, then extract",
  "presigned-pipe": "the agent GETs a presigned URL piped straight into the extractor (no Worker in the byte path)",
  "presigned-ranged-file": "the agent makes 4 parallel Range GETs of a presigned URL into a file",
  "presigned-ranged-pipe": "the agent makes 4 parallel Range GETs of a presigned URL, fed in order into the extractor",
};

function backup(name: string, format: ArchiveFormat, path: BackupPath, what: string, seed?: string): BackupStrategy {
  return { name, kind: "backup", format, path, requires: toolsFor(format), seed, description: `${what}, ${BACKUP_HOW[path]}` };
}
type Materialize = NonNullable<RestoreStrategy["materialize"]>;

function restore(name: string, format: ArchiveFormat, path: RestorePath, what: string, seed?: string, materialize?: Materialize): RestoreStrategy {
  if (format.kind === "tar") return { name, kind: "restore", format, path, requires: toolsFor(format), seed, description: `${what}: ${RESTORE_HOW[path]}` };
  // Images: fetched to a file, then extracted or mounted.
  const how = materialize ?? "extract";
  const requires: ToolName[] =
    how === "extract" ? [format.kind === "squashfs" ? "unsquashfs" : "fsck.erofs"] : how === "mount-kernel" ? [] : ["squashfuse", "fusermount3"];
  const needs: Capability[] =
    how === "mount-kernel" ? ["cap_sys_admin", `fs:${format.kind}`] : how === "mount-fuse" ? ["fuse"] : how === "overlay" ? ["fuse", "cap_sys_admin", "fs:overlay"] : [];
  const verb = {
    extract: "extracted",
    "mount-kernel": "mounted read-only by the kernel",
    "mount-fuse": "mounted read-only with squashfuse (no CAP_SYS_ADMIN)",
    overlay: "mounted with squashfuse as the lower layer of a writable overlayfs, with an overlay delta's upper directory extracted into its upper layer",
  }[how];
  return { name, kind: "restore", format, path, materialize: how, requires, needs, seed, description: `${what}: ${RESTORE_HOW[path]}, ${verb}` };
}

const squashfs = (compression: SquashfsFormat["compression"], level?: number): SquashfsFormat => ({ kind: "squashfs", compression, ...(level ? { level } : {}) });
const erofs = (compression: ErofsFormat["compression"]): ErofsFormat => ({ kind: "erofs", compression });

export const STRATEGIES: readonly Strategy[] = [
  // r2-backup-restore-benchmark.md / r2-backup-benchmark-local.md backups
  backup("tar-zst-direct", zstd3, "stream", "tar | zstd -3 -T0", SEED_R2),
  backup("tar-zst-fast-direct", zstd1, "stream", "tar | zstd -1 -T0", SEED_R2),
  backup("tar-direct", plain, "stream", "plain tar", SEED_R2),
  backup("tar-gz-direct", gzip6, "stream", "tar | gzip -6", SEED_R2),
  backup("tar-zst-fast-chunked", zstd1, "sdk-base64-chunked", "tar | zstd -1 -T0", SEED_R2),
  backup("tar-zst-stream", zstd3, "sdk-base64-stream", "tar | zstd -3 -T0", SEED_R2),
  backup("tar-zst-pipe", zstd3, "multipart", "tar | zstd -3 -T0", SEED_R2),
  backup("tar-zst-long-pipe", { ...zstd3, long: true }, "multipart", "tar | zstd -3 -T0 --long=27 (a 128 MiB match window)"),
  backup("tar-zst-fast-pipe", zstd1, "multipart", "tar | zstd -1 -T0", SEED_R2),
  backup("tar-pipe", plain, "multipart", "plain tar", SEED_R2),
  // snapshot-create-restore-benchmark.md techniques ("file" = temp file then upload, "stream" = no temp file)
  backup("pigz-file", pigz6, "stream", "tar | pigz", SEED_003),
  backup("zstd-file", zstd3, "stream", "tar | zstd -T0", SEED_003),
  backup("lz4-file", lz4, "stream", "tar | lz4", SEED_003),
  backup("pigz-stream", pigz6, "multipart", "tar | pigz", SEED_003),
  backup("zstd-stream", zstd3, "multipart", "tar | zstd -T0", SEED_003),
  backup("lz4-stream", lz4, "multipart", "tar | lz4"),
  backup("tar-zst-presigned", zstd3, "presigned-put", "tar | zstd -3 -T0"),
  // images (mksquashfs and mkfs.erofs cannot write to a pipe: always staged)
  backup("squashfs-zstd", squashfs("zstd"), "stream", "mksquashfs -comp zstd at its default level (15), as the seed did", SEED_R2),
  backup("squashfs-zstd-3", squashfs("zstd", 3), "stream", "mksquashfs -comp zstd -Xcompression-level 3"),
  backup("squashfs-lz4", squashfs("lz4"), "stream", "mksquashfs -comp lz4", SEED_R2),
  backup("squashfs-lzo", squashfs("lzo"), "stream", "mksquashfs -comp lzo", SEED_R2),
  backup("squashfs-gzip", squashfs("gzip"), "stream", "mksquashfs -comp gzip"),
  backup("squashfs-zstd-3-1m", { ...squashfs("zstd", 3), blockSize: 1 << 20 }, "stream", "mksquashfs -comp zstd level 3, 1 MiB blocks"),
  backup("tar-zst-presigned-multipart", zstd3, "presigned-multipart", "tar | zstd -3 -T0"),
  backup("squashfs-zstd-3-presigned", squashfs("zstd", 3), "presigned-put", "mksquashfs -comp zstd level 3"),
  backup("erofs-lz4", erofs("lz4"), "stream", "mkfs.erofs -zlz4"),
  backup("erofs-lz4hc", erofs("lz4hc"), "stream", "mkfs.erofs -zlz4hc"),
  backup("erofs", erofs("none"), "stream", "mkfs.erofs, uncompressed"),
  {
    ...backup("overlay-delta", zstd3, "multipart", "the upper directory of the workspace's overlay (what changed over its base image), tar | zstd -3 -T0", SEED_R2),
    delta: "overlay-upper",
  },
  {
    ...backup("tar-zst-delta", zstd3, "multipart", "the files changed since a base snapshot (from its manifest), tar | zstd -3 -T0"),
    delta: "changed-files",
  },

  // restores: one staged and one piped per archive family
  restore("restore-tar", plain, "push-file", "plain tar", SEED_R2),
  restore("restore-tar-pipe", plain, "push-pipe", "plain tar"),
  restore("restore-tar-zst", zstd3, "push-file", "tar+zstd", SEED_R2),
  restore("restore-tar-zst-pipe", zstd3, "push-pipe", "tar+zstd", SEED_R2),
  restore("presigned-tar-zst-pipe", zstd3, "presigned-pipe", "tar+zstd", SEED_R2),
  restore("presigned-tar-zst1-pipe", zstd1, "presigned-pipe", "tar+zstd (a zstd -1 archive in the seed)", SEED_R2),
  restore("presigned-tar-zst", zstd3, "presigned-file", "tar+zstd", SEED_R2),
  restore("presigned-tar-zst-ranged-pipe", zstd3, "presigned-ranged-pipe", "tar+zstd"),
  restore("presigned-tar-zst-ranged", zstd3, "presigned-ranged-file", "tar+zstd"),
  { ...restore("presigned-tar-zst-aria2c", zstd3, "presigned-ranged-file", "tar+zstd, aria2c with 4 connections"), downloader: "aria2c", requires: ["aria2c", "tar", "zstd"] },
  restore("restore-tar-gz", gzip6, "push-file", "tar+gzip", SEED_R2),
  restore("restore-tar-gz-pipe", gzip6, "push-pipe", "tar+gzip"),
  restore("restore-tar-lz4", lz4, "push-file", "tar+lz4"),
  restore("restore-tar-lz4-pipe", lz4, "push-pipe", "tar+lz4"),

  restore("presigned-squashfs-mount", squashfs("zstd"), "presigned-file", "squashfs", SEED_R2, "mount-kernel"),
  restore("presigned-squashfuse-mount", squashfs("zstd"), "presigned-file", "squashfs", SEED_R2, "mount-fuse"),
  { ...restore("presigned-squashfs-mount-aria2c", squashfs("zstd"), "presigned-ranged-file", "squashfs, aria2c with 4 connections", SEED_R2, "mount-kernel"), downloader: "aria2c", requires: ["aria2c"] },
  { ...restore("presigned-squashfs-lz4-mount-aria2c", squashfs("lz4"), "presigned-ranged-file", "squashfs (lz4 in the seed), aria2c with 4 connections", SEED_R2, "mount-kernel"), downloader: "aria2c", requires: ["aria2c"] },
  restore("presigned-squashfs-lz4-mount", squashfs("lz4"), "presigned-file", "squashfs (lz4 in the seed)", SEED_R2, "mount-kernel"),
  restore("presigned-squashfs-extract", squashfs("zstd"), "presigned-file", "squashfs", SEED_R2, "extract"),
  restore("restore-squashfs-mount", squashfs("zstd"), "push-file", "squashfs", SEED_R2, "mount-kernel"),
  restore("restore-squashfs-extract", squashfs("zstd"), "push-file", "squashfs", SEED_R2, "extract"),
  restore("overlay-restore", squashfs("zstd"), "presigned-file", "squashfs base (+ an overlay-delta)", SEED_R2, "overlay"),
  restore("presigned-erofs-mount", erofs("lz4"), "presigned-file", "erofs", undefined, "mount-kernel"),
  restore("presigned-erofs-extract", erofs("lz4"), "presigned-file", "erofs", undefined, "extract"),
];

export const DEFAULT_BACKUP = "tar-zst-pipe";

export function findStrategy(name: string): Strategy | undefined {
  return STRATEGIES.find((s) => s.name === name);
}

/**
 * Which restores can read an archive: tar by compressor (gzip and pigz write the same format), images by kind
 * (unsquashfs, the kernel and squashfuse read every squashfs compressor).
 */
export function archiveFamily(format: ArchiveFormat): string {
  if (format.kind !== "tar") return format.kind;
  return format.compression === "pigz" ? "gzip" : format.compression;
}

/** A short name of a format for messages: "tar+zstd", "squashfs+lz4". */
export function formatName(format: ArchiveFormat): string {
  return format.compression === "none" ? format.kind : `${format.kind}+${format.compression}`;
}

export const isImage = (f: ArchiveFormat): f is ImageFormat => f.kind !== "tar";

/** Restore strategies that can read a snapshot made with `format`. */
export function restoresFor(format: ArchiveFormat): RestoreStrategy[] {
  return STRATEGIES.filter((s): s is RestoreStrategy => s.kind === "restore" && archiveFamily(s.format) === archiveFamily(format));
}

/** Restore strategies that can restore a snapshot, deltas included (they need a pipe, or the overlay). */
export function restoresForSnapshot(snapshot: { format: ArchiveFormat; delta?: { kind: string } }): RestoreStrategy[] {
  const restores = STRATEGIES.filter((s): s is RestoreStrategy => s.kind === "restore");
  if (snapshot.delta?.kind === "overlay-upper") return restores.filter((s) => s.materialize === "overlay");
  const fits = restoresFor(snapshot.format);
  return snapshot.delta ? fits.filter((s) => s.path.endsWith("-pipe")) : fits;
}

/** What a strategy needs of the sandbox beyond tools. */
export type Capability = "fuse" | "cap_sys_admin" | "fs:squashfs" | "fs:erofs" | "fs:overlay";

/** Why a strategy cannot run in a sandbox as probed, or undefined when it can. */
export function unavailableReason(s: Strategy, probe: Pick<ProbeResult, "tools" | "fuse" | "capSysAdmin" | "filesystems">): string | undefined {
  const reasons: string[] = [];
  const missing = s.requires.filter((t) => !probe.tools[t]);
  if (missing.length) reasons.push(`missing tool${missing.length > 1 ? "s" : ""}: ${missing.join(", ")}`);
  for (const need of s.needs ?? []) {
    if (need === "fuse" && !probe.fuse) reasons.push("no /dev/fuse");
    if (need === "cap_sys_admin" && !probe.capSysAdmin) reasons.push("no CAP_SYS_ADMIN (kernel mounts need it)");
    if (need.startsWith("fs:") && !probe.filesystems.includes(need.slice(3))) reasons.push(`the kernel has no ${need.slice(3)} filesystem`);
  }
  return reasons.length ? reasons.join("; ") : undefined;
}
