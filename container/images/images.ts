// Filesystem images of a tree: made to a file in the sandbox (mksquashfs and mkfs.erofs seek back to write their
// superblock, so they cannot write to a pipe; the file then travels like any other), and extracted back into a
// directory (unsquashfs, fsck.erofs --extract). Mounting an image instead is mounts.ts. The argv and the reasons
// for each flag are in image-argv.ts.
import { createReadStream } from "node:fs";
import { lstat, mkdir, open, rm } from "node:fs/promises";
import { availableParallelism } from "node:os";
import { dirname } from "node:path";
import { pipeline } from "node:stream/promises";
import { Writable } from "node:stream";
import { AgentError } from "../http/agent-error.ts";
import { erofsSetidFiles, readErofsTree, type ErofsDirent } from "./erofs-dirs.ts";
import { relinkErofsHardLinks } from "./erofs-links.ts";
import { checkErofsNames } from "./erofs-names.ts";
import { HashingStream } from "../archive/hashing-stream.ts";
import { extractImageArgv, makeImageArgv } from "./image-argv.ts";
import { runLazyTool } from "../system/lazy-tool.ts";
import type { ImageFormat, WrittenBytes } from "../contract/protocol.ts";
import { startTool } from "../system/run-tool.ts";

/** Runs a tool whose stdout nobody needs (left unread, a chatty tool would fill the pipe and stall). */
export function runQuiet(argv: string[]): Promise<void> {
  return startTool(argv, { stdout: "ignore" }).done;
}

/** The size and SHA-256 of a finished image file. */
export async function hashImageFile(file: string): Promise<{ bytes: number; sha256: string }> {
  const hashing = new HashingStream();
  await pipeline(createReadStream(file, { highWaterMark: 1 << 20 }), hashing, new Writable({ write: (_c, _e, done) => done() }));
  return { bytes: hashing.bytes, sha256: hashing.digest() };
}

/**
 * Makes an image of `dir` at `output` (replacing it) and answers the finished file's size and SHA-256. `excluded`:
 * paths relative to `dir` left out with everything below them (a backup's selection, selection.ts).
 */
export async function makeImage(dir: string, format: ImageFormat, output: string, excluded: string[] = []): Promise<WrittenBytes> {
  const started = performance.now();
  if (output === dir || output.startsWith(dir + "/")) throw new AgentError("bad_request", "output: the image cannot be written inside the tree it is made of", "output");
  if ((await lstat(output).catch(() => null))?.isDirectory()) throw new AgentError("bad_request", "output: is a directory", "output");
  await rm(output, { force: true });
  await mkdir(dirname(output), { recursive: true });
  try {
    await runQuiet(makeImageArgv(dir, output, format, availableParallelism(), excluded));
  } catch (e) {
    await rm(output, { force: true });
    throw e;
  }
  return { ...(await hashImageFile(output)), ms: Math.round(performance.now() - started) };
}

const SQUASHFS_COMPRESSION: Record<number, string> = { 1: "gzip", 2: "lzma", 3: "lzo", 4: "xz", 5: "lz4", 6: "zstd" };

export interface ImageKind {
  kind: ImageFormat["kind"];
  /** squashfs only: the superblock names its compressor */
  compression?: string;
}

/** What an image file is, by its magic: "hsqs" at 0 for squashfs, 0xE0F5E1E2 at 1024 for erofs. */
export async function detectImage(file: string): Promise<ImageKind | null> {
  const fh = await open(file, "r");
  try {
    const head = Buffer.alloc(1028);
    const { bytesRead } = await fh.read(head, 0, head.length, 0);
    if (bytesRead >= 96 && head.readUInt32LE(0) === 0x73717368) return { kind: "squashfs", compression: SQUASHFS_COMPRESSION[head.readUInt16LE(20)] ?? "unknown" };
    if (bytesRead >= 1028 && head.readUInt32LE(1024) === 0xe0f5e1e2) return { kind: "erofs" };
    return null;
  } finally {
    await fh.close();
  }
}

/**
 * Refuses an image that is not what the request says it is, before any tool runs, so the answer names the
 * field at fault instead of relaying a tool's confusion. `archive` must be an existing file.
 */
export async function checkImage(file: string, format: ImageFormat): Promise<{ bytes: number }> {
  const st = await lstat(file).catch(() => null);
  if (!st?.isFile()) throw new AgentError("not_found", "archive: no image file there", "archive");
  const found = await detectImage(file);
  if (!found) throw new AgentError("bad_request", `archive: not a squashfs or erofs image (no magic number where format.kind ${format.kind} has it)`, "archive");
  if (found.kind !== format.kind) throw new AgentError("bad_request", `format.kind: the archive is a ${found.kind} image, not ${format.kind}`, "format.kind");
  if (found.compression && found.compression !== format.compression) {
    throw new AgentError("bad_request", `format.compression: the archive is a squashfs image compressed with ${found.compression}, not ${format.compression}`, "format.compression");
  }
  return { bytes: st.size };
}

/**
 * Extracts an image into `dir` (created if missing, merged into if not). An erofs image's names are checked first:
 * fsck.erofs writes a name holding '/' outside `dir` (erofs-names.ts). unsquashfs (4.5.1, and distributions'
 * patched 4.5) refuses such names and duplicate entries itself (CVE-2021-40153, CVE-2021-41072); the hostile
 * corpus tests both tools as installed.
 */
export async function extractImage(file: string, format: ImageFormat, dir: string, options: { keepOwnership?: boolean } = {}): Promise<{ ms: number; relinked?: number; setidRestored?: number }> {
  const started = performance.now();
  // An erofs image's tree, read once (types from its inodes): checked before extraction, then relinked and, with
  // keepOwnership, its set-id bits given back.
  const tree = format.kind === "erofs" ? await readErofsTree(file) : undefined;
  if (tree) checkErofsNames(tree, "archive");
  await mkdir(dir, { recursive: true });
  await runQuiet(extractImageArgv(file, dir, format.kind));
  const relinked = tree ? await relinkErofsHardLinks(tree, file, dir) : undefined;
  const setidRestored = tree && options.keepOwnership ? await restoreErofsSetid(tree, dir) : undefined;
  return { ms: Math.round(performance.now() - started), ...(relinked !== undefined ? { relinked } : {}), ...(setidRestored !== undefined ? { setidRestored } : {}) };
}

/**
 * Sets setuid/setgid again where the image has them (erofs-dirs.ts erofsSetidFiles says why they are lost), through
 * snapflow-lazy's `setid`: each file is opened beneath `dir` (the staging directory of a fresh extraction) without
 * following a symlink, so a name the image lists through a symlink the extraction made reaches nothing outside; a
 * name that is not a regular file there is left alone.
 */
async function restoreErofsSetid(tree: Iterable<ErofsDirent>, dir: string): Promise<number> {
  const files = erofsSetidFiles(tree);
  if (!files.length) return 0;
  return (await runLazyTool<{ set: number }>(["setid", "--root", dir], Buffer.from(JSON.stringify(files)))).set;
}
