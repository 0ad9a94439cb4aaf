// Extract an archive into a directory: from a stream (the HTTP request body, or a presigned download: nothing
// staged on disk) or from a file already in the sandbox.
//
// With an expected manifest the restore is verified as the bytes arrive, and nothing is read twice:
//
//   archive bytes ─▶ HashingStream ─▶ decompressor ─▶ TarManifestStream ─▶ tar x
//   (size, SHA-256 of the stored object)   (each entry hashed and compared with the manifest as it passes)
//
// then a metadata-only walk of the result (types, modes, sizes, mtimes, link targets, hard links) against the
// manifest. A mismatch fails with verify_failed naming the first differences. A delta layer holds only part of
// the tree: `complete: false` checks the entries it holds, and the walk is left for after the last layer.
import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { lstat, mkdir } from "node:fs/promises";
import { join } from "node:path";
import type { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { startDecompressor } from "../archive/compressor.ts";
import { HashingStream } from "../archive/hashing-stream.ts";
import type { Comparison, Manifest, ManifestEntry, TarFormat, WrittenBytes } from "../contract/protocol.ts";
import { startTool, stdinUntilClosed, toolAndFlow } from "../system/run-tool.ts";
import { tarExtractArgv, tarExtractPlainArgv } from "../archive/tar-argv.ts";
import { TarManifestStream } from "../archive/tar-manifest.ts";
import { checkTree, verifyFailed } from "../manifest/tree-verify.ts";
import type { ManifestReader } from "../manifest/manifest-file.ts";

export interface ExtractVerification {
  /** read as a stream by the in-stream check and again by the walk (manifest-file.ts openManifest) */
  expected: Manifest | ManifestReader;
  /** the archive holds the whole tree (a full snapshot, or the last layer's walk): default true */
  complete?: boolean;
  /** walk the result and compare its metadata: default = complete */
  walk?: boolean;
  limit?: number;
}

export interface VerifiedExtract extends WrittenBytes {
  verified: {
    content: "in-stream";
    /** archive entries hashed and compared as they passed */
    entries: number;
    metadata: "walk" | "not-walked";
    /** entries the walk compared */
    walked?: number;
    walkMs?: number;
    /** a restore that kept owners: whether the walk compared them (tree-verify.ts) */
    owners?: "compared" | "not-in-manifest";
    /** made, checked and walked by the native engine (engine-unpack.ts), not by tar and the agent */
    engine?: "native";
  };
  equal: true;
}

/** Returns the size and SHA-256 of the archive bytes consumed, so the caller can check them. */
export async function extractFromStream(input: Readable, format: TarFormat, dir: string): Promise<WrittenBytes>;
export async function extractFromStream(input: Readable, format: TarFormat, dir: string, verify: ExtractVerification): Promise<VerifiedExtract>;
export async function extractFromStream(input: Readable, format: TarFormat, dir: string, verify?: ExtractVerification): Promise<WrittenBytes | VerifiedExtract> {
  if (verify) return extractVerified(input, format, dir, verify);
  const started = performance.now();
  await mkdir(dir, { recursive: true });
  const tar = startTool(tarExtractArgv(dir, format), { stdin: "pipe", stdout: "ignore" });
  const hashing = new HashingStream();
  await toolAndFlow(tar, pipeline(input, hashing, stdinUntilClosed(tar)));
  return { bytes: hashing.bytes, sha256: hashing.digest(), ms: Math.round(performance.now() - started) };
}

export function extractFromFile(archive: string, format: TarFormat, dir: string, verify?: ExtractVerification): Promise<WrittenBytes | VerifiedExtract> {
  const input = createReadStream(archive, { highWaterMark: 1 << 20 });
  return verify ? extractFromStream(input, format, dir, verify) : extractFromStream(input, format, dir);
}

/** A GNU sparse file the stream could not hash (tar-manifest.ts): hash it as tar wrote it. */
async function hashExtracted(dir: string, entry: ManifestEntry): Promise<ManifestEntry> {
  const path = join(dir, entry.path);
  const st = await lstat(path).catch(() => undefined);
  if (!st?.isFile()) return { ...entry, size: -1 };
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(path, { highWaterMark: 1 << 20 })) hash.update(chunk as Buffer);
  return { ...entry, size: st.size, sha256: hash.digest("hex") };
}

async function extractVerified(input: Readable, format: TarFormat, dir: string, verify: ExtractVerification): Promise<VerifiedExtract> {
  const started = performance.now();
  const complete = verify.complete ?? true;
  await mkdir(dir, { recursive: true });
  const tar = startTool(tarExtractPlainArgv(dir), { stdin: "pipe", stdout: "ignore" });
  tar.child.stdin!.on("error", () => {});
  const hashing = new HashingStream();
  const checking = new TarManifestStream({ expected: verify.expected, complete, limit: verify.limit });
  const decompressor = startDecompressor(format);
  const flows: Promise<unknown>[] = [];
  if (decompressor) {
    decompressor.child.stdin!.on("error", () => {});
    flows.push(toolAndFlow(decompressor, Promise.all([pipeline(input, hashing, decompressor.child.stdin!), pipeline(decompressor.child.stdout!, checking, stdinUntilClosed(tar))])));
  } else {
    flows.push(pipeline(input, hashing, checking, stdinUntilClosed(tar)));
  }
  try {
    await toolAndFlow(tar, Promise.all(flows));
  } catch (e) {
    // Upstream first: a decompressor that failed on its own (damaged bytes: "zstd: Data corruption detected") is
    // why tar then saw "Unexpected EOF"; its message names the cause, tar's only the consequence.
    const failedFirst = decompressor !== undefined && decompressor.child.exitCode !== null && decompressor.child.exitCode !== 0;
    if (decompressor && decompressor.child.exitCode === null) decompressor.child.kill("SIGTERM");
    if (failedFirst) throw await flows[0]!.then(() => e, (upstream: unknown) => upstream);
    throw e;
  }
  for (const { entry, want } of checking.deferred) checking.settleDeferred(await hashExtracted(dir, entry), want);
  if (!checking.equal) {
    const c: Comparison = { equal: false, counts: checking.counts, differences: checking.differences };
    throw verifyFailed("the archive's content", c);
  }
  const verified: VerifiedExtract["verified"] = { content: "in-stream", entries: checking.count, metadata: "not-walked" };
  if (verify.walk ?? complete) {
    const walked = await checkTree(dir, verify.expected, { limit: verify.limit });
    if (!walked.equal) throw verifyFailed("the restored tree", walked);
    Object.assign(verified, { metadata: "walk", walked: walked.verified.entries, walkMs: walked.ms });
  }
  return { bytes: hashing.bytes, sha256: hashing.digest(), ms: Math.round(performance.now() - started), verified, equal: true };
}
