// Pure: the argv of every tool that makes, extracts, mounts and unmounts filesystem images and overlays. No I/O,
// so tests can check every combination cheaply, and each flag's reason is written next to it.
//
// What a restore must bring back is what the manifest compares: modes, mtimes (whole seconds), symlink targets,
// content and hard-link grouping. Both image builders keep all of it by default, with one trap: they honour
// SOURCE_DATE_EPOCH (reproducible builds) by clamping every file's mtime to it, so the builders run under
// `env -u SOURCE_DATE_EPOCH`. Ownership is stored numerically by both formats (as `tar --numeric-owner`);
// xattrs are left out, as tar leaves them out.
import { AgentError } from "../http/agent-error.ts";
import type { ErofsFormat, ImageFormat, SquashfsFormat } from "../contract/protocol.ts";

/** A builder that must see every file's own mtime, whatever the agent's environment says. */
const WITHOUT_SOURCE_DATE_EPOCH = ["env", "-u", "SOURCE_DATE_EPOCH"];

/** Level ranges per squashfs compressor, as `mksquashfs -help` states them (4.5.1). */
const SQUASHFS_LEVELS: Record<SquashfsFormat["compression"], [number, number] | undefined> = {
  zstd: [1, 22],
  gzip: [1, 9],
  lzo: [1, 9],
  lz4: [1, 12],
  xz: undefined,
};

function levelError(message: string): AgentError {
  return new AgentError("bad_request", `format.level: ${message}`, "format.level");
}

/**
 * mksquashfs's level flags differ per compressor: zstd and gzip take -Xcompression-level; lzo takes it too but
 * only for its (default) lzo1x_999 algorithm, so it is named; lz4 has no levels, only -Xhc (high compression),
 * which levels 3 and above select, as with the lz4 command line; xz has no level at all.
 */
export function squashfsLevelArgs(f: SquashfsFormat): string[] {
  if (f.level === undefined) return [];
  const range = SQUASHFS_LEVELS[f.compression];
  if (!range) throw levelError(`squashfs ${f.compression} has no compression level`);
  if (f.level < range[0] || f.level > range[1]) throw levelError(`squashfs ${f.compression} levels are ${range[0]}–${range[1]}, got ${f.level}`);
  switch (f.compression) {
    case "lz4":
      return f.level >= 3 ? ["-Xhc"] : [];
    case "lzo":
      return ["-Xalgorithm", "lzo1x_999", "-Xcompression-level", String(f.level)];
    default:
      return ["-Xcompression-level", String(f.level)];
  }
}

/**
 * mksquashfs DIR OUT. Kept by default and relied on: modes, mtimes, numeric uid/gid, symlinks, hard links (one
 * inode), sparse files (holes are not stored). -noappend: OUT is replaced, never appended to. -exit-on-error:
 * a file that cannot be read fails the build instead of being left out with a warning. -no-xattrs: as tar.
 * -quiet -no-progress: nothing on stdout.
 */
export function mksquashfsArgv(dir: string, out: string, f: SquashfsFormat, processors: number, excluded: string[] = []): string[] {
  return [
    ...WITHOUT_SOURCE_DATE_EPOCH,
    "mksquashfs", dir, out,
    "-noappend", "-exit-on-error", "-no-xattrs", "-quiet", "-no-progress",
    "-comp", f.compression, ...squashfsLevelArgs(f),
    ...(f.blockSize ? ["-b", String(f.blockSize)] : []),
    "-processors", String(Math.max(1, processors)),
    // A backup's selection: exact paths relative to DIR, as argv (the -ef file format strips leading blanks);
    // -e takes every argument after it, so it comes last.
    ...(excluded.length ? ["-e", ...excluded] : []),
  ];
}

/**
 * tar2sqfs (squashfs-tools-ng) OUT: a squashfs image from the tar stream on stdin, so a backup builds its image in
 * the same read of the tree that hashes it (archive.ts). Same compressor, level and block size as mksquashfs
 * (levels checked by squashfsLevelArgs); -s: a tar record it cannot read fails the build; -x: no xattrs, as tar;
 * -q: nothing on stdout. Times are kept (the default). The root directory is not in the stream: `root` gives it the
 * tree's own owner, mode and mtime, as mksquashfs would.
 */
export function tar2sqfsArgv(out: string, f: SquashfsFormat, processors: number, root: { uid: number; gid: number; mode: number; mtime: number }): string[] {
  const mks = squashfsLevelArgs(f);
  const level = f.level === undefined ? [] : f.compression === "lz4" ? (mks.length ? ["hc"] : []) : f.compression === "lzo" ? ["algorithm=lzo1x_999", `level=${f.level}`] : [`level=${f.level}`];
  return [
    ...WITHOUT_SOURCE_DATE_EPOCH,
    "tar2sqfs", "-q", "-s", "-x", "-f",
    "-c", f.compression, ...(level.length ? ["-X", level.join(",")] : []),
    ...(f.blockSize ? ["-b", String(f.blockSize)] : []),
    "-j", String(Math.max(1, processors)),
    "-d", `uid=${root.uid},gid=${root.gid},mode=${(root.mode & 0o7777).toString(8)},mtime=${root.mtime}`,
    out,
  ];
}

/** -z for mkfs.erofs: none stores plainly; only lz4hc has levels (0–12); mkfs.erofs refuses a level for lz4. */
export function erofsCompressionArgs(f: ErofsFormat): string[] {
  if (f.level !== undefined && f.compression !== "lz4hc") throw levelError(`erofs ${f.compression} has no compression level (only lz4hc does)`);
  if (f.compression === "none") return [];
  return [f.level === undefined ? `-z${f.compression}` : `-z${f.compression},${f.level}`];
}

/**
 * mkfs.erofs OUT DIR. Times: erofs-utils 1.5 and later keep each file's mtime (an extended inode where it differs
 * from the build time); --preserve-mtime says so explicitly against --ignore-mtime. -T (and, from 1.7,
 * --all-time) would stamp every file with one time, so it is never passed. Hard links are one inode. -x-1: no
 * xattrs, as tar. Uncompressed images are chunk-based (--chunksize=4096): identical 4 KiB chunks, the zeros of a
 * sparse file among them, are stored once, where a plain layout stores a sparse file's full apparent size.
 */
export function mkfsErofsArgv(dir: string, out: string, f: ErofsFormat, excluded: string[] = []): string[] {
  return [
    ...WITHOUT_SOURCE_DATE_EPOCH,
    "mkfs.erofs", "--quiet", "--preserve-mtime", "-x-1",
    ...erofsCompressionArgs(f),
    ...(f.compression === "none" ? ["--chunksize=4096"] : []),
    // A backup's selection: exact paths relative to DIR.
    ...excluded.map((p) => `--exclude-path=${p}`),
    out, dir,
  ];
}

export function makeImageArgv(dir: string, out: string, f: ImageFormat, processors: number, excluded: string[] = []): string[] {
  return f.kind === "squashfs" ? mksquashfsArgv(dir, out, f, processors, excluded) : mkfsErofsArgv(dir, out, f, excluded);
}

/**
 * Extract an image into `dir` (which may exist): a 0700 staging directory (safe-extract.ts). unsquashfs: -f writes
 * into an existing directory and overwrites; it restores modes, mtimes, symlinks and hard links, and as root the
 * image's owners. fsck.erofs: --overwrite for an existing directory, --preserve-perms for modes whoever runs it;
 * as root it keeps owners too (its default). Foreign owners and setuid/setgid bits are reset afterwards unless
 * the restore keeps them (sanitize-extracted.ts). fsck.erofs sets mtimes, but before erofs-utils 1.7 it writes
 * each hard link as a separate copy (see erofs-links.ts).
 */
export function extractImageArgv(file: string, dir: string, kind: ImageFormat["kind"]): string[] {
  if (kind === "squashfs") return ["unsquashfs", "-d", dir, "-f", "-n", "-q", "-no-xattrs", file];
  return ["fsck.erofs", `--extract=${dir}`, "--overwrite", "--preserve-perms", file];
}

/**
 * The kernel's read-only mount of an image file, through a loop device that is freed on unmount. nosuid,nodev: an
 * image made in another sandbox must not bring setuid binaries or device nodes that work.
 */
export function mountKernelArgv(file: string, dir: string, kind: ImageFormat["kind"]): string[] {
  return ["mount", "-t", kind, "-o", "loop,ro,nosuid,nodev", file, dir];
}

/**
 * FUSE tools per image kind, best first. squashfuse_ll (the low-level API) reports the image's own inode numbers,
 * so hard links show as one inode; the high-level squashfuse numbers each path separately and so loses them.
 */
export const FUSE_IMAGE_TOOLS: Record<ImageFormat["kind"], string[]> = {
  squashfs: ["squashfuse_ll", "squashfuse"],
  erofs: ["erofsfuse"],
};

/** Every FUSE image tool daemonizes once the mount is in place, so the command returns when it is usable. */
export function mountFuseArgv(tool: string, file: string, dir: string): string[] {
  // FUSE mounts by an unprivileged user are nosuid,nodev anyway; as root they are not unless asked.
  return [tool, "-o", "nosuid,nodev", file, dir];
}

/**
 * Overlay options separate with ',' and lowerdir stacks with ':'; a path holding either (or a backslash, the
 * escape) would be read as something else, so it is refused rather than escaped.
 */
export function checkOverlayPath(path: string, field: string): string {
  if (/[,:\\]/.test(path)) throw new AgentError("bad_request", `${field}: an overlay cannot use a path containing ',', ':' or '\\': '${path}'`, field);
  return path;
}

export function overlayOptions(lower: string, upper: string, work: string): string {
  return `lowerdir=${lower},upperdir=${upper},workdir=${work}`;
}

/**
 * redirect_dir=off, whatever the kernel's default: a directory renamed is then copied up whole, so an upper holds
 * every name that changed, as a plain tree a tar can carry (a delta) and a compaction can trust (filecas lower.go).
 */
export function overlayKernelArgv(lower: string, upper: string, work: string, dir: string): string[] {
  return ["mount", "-t", "overlay", "overlay", "-o", `nosuid,nodev,redirect_dir=off,${overlayOptions(lower, upper, work)}`, dir];
}

/**
 * A read-only overlay of `lowers` (topmost first, no upper: the kernel mounts it read-only). Relative lowers are
 * resolved from the mount's working directory: the kernel reads the options as one page (4096 bytes), and a chain's
 * layers, named relative to the directory they share, stay far below it.
 */
export function overlayStackArgv(lowers: string[], dir: string): string[] {
  return ["mount", "-t", "overlay", "overlay", "-o", `ro,nosuid,nodev,lowerdir=${lowers.join(":")}`, dir];
}

/** mount(2)'s data page, less its terminating NUL: options longer than this are cut by the kernel (E2BIG/EINVAL). */
export const MOUNT_OPTIONS_MAX = 4095;

export function overlayFuseArgv(lower: string, upper: string, work: string, dir: string): string[] {
  return ["fuse-overlayfs", "-o", `nosuid,nodev,${overlayOptions(lower, upper, work)}`, dir];
}

/** FUSE mounts are taken down by fusermount3 (which also ends the daemon); kernel mounts by umount. */
export function unmountArgv(dir: string, fuse: boolean): string[] {
  return fuse ? ["fusermount3", "-u", dir] : ["umount", dir];
}
