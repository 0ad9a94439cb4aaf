// Archive a tree: tar (+ a compressor) writing to the HTTP response (streaming strategies: the archive never
// touches the sandbox's disk) or to a file (direct strategies).
//
// Two ways:
//   archiveToStream / archiveToFile      tar -I compressor over the tree (or a list): the archive only.
//   archiveWithManifest (single pass)    the archive AND its manifest from one read of the source:
//
//     tree-walk (lstat) ──names──▶ tar -T - ──tar bytes──▶ TarManifestStream ──▶ compressor ──▶ HashingStream ──▶ out
//                                                            (parse, hash each file)
//
//   The walk's lstat key (inode, device, ns mtime and ctime) is taken before tar reads each file, as git's
//   index does, so a change after the walk shows up at the next incremental. Everything else in the manifest
//   (hashes, sizes, modes, mtimes, link targets, hard links) comes from the tar stream: the manifest describes
//   exactly what was archived. A file changed while tar read it (tar notices by its ctime) or removed after
//   the walk fails the archive naming the file, rather than keeping a torn copy.
//   With a base manifest it makes a delta: only what changed by metadata is named to tar (delta.ts).
import { createHash } from "node:crypto";
import { once } from "node:events";
import { createWriteStream } from "node:fs";
import { mkdir, rm, writeFile } from "node:fs/promises";
import { dirname } from "node:path";
import type { Readable, Writable } from "node:stream";
import { finished, pipeline } from "node:stream/promises";
import { AgentError } from "../http/agent-error.ts";
import { startCompressor } from "./compressor.ts";
import { EngineBaseUnusable, EngineLacksPack, engineBinary, engineKeptFile, enginePass, engineRequest, preferredEngine } from "./engine-pass.ts";
import { classifyByMetadata, confirmSuspects, deltaLayer, deltaList, mergeDeltaManifest } from "./delta.ts";
import { HashingStream } from "./hashing-stream.ts";
import { writeManifestHashed } from "../manifest/manifest-file.ts";
import { keepManifest } from "../manifest/manifest-kept.ts";
import { totalsOf } from "../manifest/manifest.ts";
import type { Manifest, ManifestEntry, TarFormat, WrittenBytes } from "../contract/protocol.ts";
import { startTool, toolAndFlow, type RunningTool } from "../system/run-tool.ts";
import { tarCreateArgv, tarCreateFromStdinArgv } from "./tar-argv.ts";
import { TarManifestStream } from "./tar-manifest.ts";
import type { SinglePassOptions, SinglePassResult } from "./single-pass.ts";
import type { CompiledSelection } from "./selection.ts";
import { walkAll, walkTree, type WalkEntry } from "../manifest/tree-walk.ts";

/** Streams the archive of `dir` into `out`. Rejects (and the caller aborts `out`) if tar fails. */
export async function archiveToStream(dir: string, format: TarFormat, out: Writable, filesFrom?: string): Promise<WrittenBytes> {
  const started = performance.now();
  const tar = startTool(tarCreateArgv(dir, format, filesFrom));
  const hashing = new HashingStream();
  await toolAndFlow(tar, pipeline(tar.child.stdout!, hashing, out));
  return { bytes: hashing.bytes, sha256: hashing.digest(), ms: Math.round(performance.now() - started) };
}

/** Writes `output` through `write`; a failure removes the half-written file. */
async function toFileOrNothing<T>(output: string, write: (out: Writable) => Promise<T>): Promise<T> {
  await mkdir(dirname(output), { recursive: true });
  try {
    return await write(createWriteStream(output));
  } catch (e) {
    // A half-written archive is nobody's: it would only fill the disk (the usual reason this failed).
    await rm(output, { force: true });
    throw e;
  }
}

export function archiveToFile(dir: string, format: TarFormat, output: string, filesFrom?: string): Promise<WrittenBytes> {
  return toFileOrNothing(output, (out) => archiveToStream(dir, format, out, filesFrom));
}

export type { SinglePassOptions, SinglePassResult } from "./single-pass.ts";

/** tar's words for a source that changed under it, as `tar: ./path: <words>` lines on stderr. */
const CHANGED_UNDER_TAR = /tar: \.\/(.*?): (file changed as we read it|File shrank by \d+ bytes|Cannot stat: No such file or directory|Cannot open: No such file or directory|File removed before we read it)/g;

function sourceChanged(e: unknown): unknown {
  if (!(e instanceof AgentError)) return e;
  const hits = [...e.message.matchAll(CHANGED_UNDER_TAR)].map((m) => `${m[1]} (${m[2]})`);
  if (!hits.length) return e;
  return new AgentError("tool_failed", `the tree changed while it was archived, so no consistent archive was made; try again. ${hits.slice(0, 10).join("; ")}`);
}

/** Writes `./name\0` for each name to tar's stdin, respecting backpressure; ends stdin. */
async function feedNames(tar: RunningTool, names: AsyncIterable<string> | Iterable<string>): Promise<void> {
  const stdin = tar.child.stdin!;
  let batch = "";
  const flush = async () => {
    if (!batch) return;
    const ok = stdin.write(batch);
    batch = "";
    if (!ok) await Promise.race([once(stdin, "drain"), tar.done]);
  };
  try {
    for await (const name of names) {
      batch += `./${name}\0`;
      if (batch.length >= 1 << 16) await flush();
    }
    await flush();
  } finally {
    stdin.end();
  }
}

async function* namesOfFullWalk(dir: string, walked: WalkEntry[], ended: () => void, exclude?: CompiledSelection["exclude"]): AsyncGenerator<string> {
  for await (const e of walkTree(dir, { exclude })) {
    walked.push(e);
    // tar cannot archive a socket (it warns and skips it): leave it out of list and manifest alike.
    if (!e.socket) yield e.path;
  }
  ended();
}

/**
 * The archive of `dir` into `out` and its manifest into `options.manifestOut`, from one read of the source. `out`
 * ends only after the manifest (and result) files are written; on failure it is destroyed, never ended.
 */
export async function archiveWithManifest(dir: string, format: TarFormat, out: Writable, options: SinglePassOptions): Promise<SinglePassResult> {
  try {
    return await singlePass(dir, format, out, options);
  } catch (e) {
    await recordFailure(options, e, readerLeft(out));
    out.destroy();
    throw e;
  }
}

/**
 * A streamed response that already began cannot carry an error: the reader sees a cut connection. The result file
 * can, so it is written before anything cuts the stream, and the Worker reads why (a refused name, a file changed
 * under tar). An error is recorded once, where it is first caught. Not when the reader hung up: nobody reads it then,
 * and a run whose Workflow was terminated has had its staging removed already (a record written after that is left).
 */
const recorded = new WeakSet<object>();
async function recordFailure(options: SinglePassOptions, e: unknown, readerGone: boolean): Promise<void> {
  if (!options.resultOut || readerGone || (typeof e === "object" && e !== null && recorded.has(e))) return;
  if (typeof e === "object" && e !== null) recorded.add(e);
  const failed = e instanceof AgentError ? e : new AgentError("tool_failed", e instanceof Error ? e.message : String(e));
  await mkdir(dirname(options.resultOut), { recursive: true }).catch(() => {});
  await writeFile(options.resultOut, JSON.stringify({ ...failed.toJSON(), status: failed.status })).catch(() => {});
}

/** A reader that hung up leaves the stream destroyed without an error; our own destroy comes after the record, or carries one. */
const readerLeft = (out: Writable) => out.destroyed && !out.errored;

/**
 * Where the parsed tar stream goes: a compressor and the caller's writable (an archive), or an image builder
 * reading tar (images.ts). `flows` are the sink's own pipelines, `written` the size and SHA-256 of what it made,
 * `finish` runs once the manifest is on disk (a streamed reader finds it there when the stream ends).
 */
export interface TarSink {
  flows(tarBytes: Readable): Promise<unknown>[];
  abort(): void;
  written(): Promise<{ bytes: number; sha256: string }>;
  finish(): Promise<void>;
  /** Whoever reads what the sink makes has hung up (a file written here has no such reader). */
  readerLeft?(): boolean;
}

function archiveSink(format: TarFormat, out: Writable): TarSink {
  const compressor = startCompressor(format);
  const hashing = new HashingStream();
  return {
    flows(tarBytes) {
      if (!compressor) return [pipeline(tarBytes, hashing, out, { end: false })];
      compressor.child.stdin!.on("error", () => {});
      // `out` is ended by finish(), once the manifest is on disk.
      return [pipeline(tarBytes, compressor.child.stdin!), toolAndFlow(compressor, pipeline(compressor.child.stdout!, hashing, out, { end: false }))];
    },
    abort() {
      if (compressor && compressor.child.exitCode === null) compressor.child.kill("SIGTERM");
    },
    written: async () => ({ bytes: hashing.bytes, sha256: hashing.digest() }),
    async finish() {
      out.end();
      await finished(out);
    },
    readerLeft: () => readerLeft(out),
  };
}

/**
 * The native engine makes the pass when it can (engine-pass.ts: tar with zstd, a delta's base kept here, a selection it
 * reads alike, and a binary here that has `pack`); otherwise the agent's own pass does, with the same archive format
 * and the same manifests.
 */
async function singlePass(dir: string, format: TarFormat, out: Writable, options: SinglePassOptions): Promise<SinglePassResult> {
  const request = (options.engine ?? preferredEngine()) === "native" ? engineRequest(format, options) : undefined;
  const bin = request ? await engineBinary() : null;
  if (request && bin) {
    const result = await enginePass(bin, dir, request, out, options).catch((e: unknown) => {
      // Nothing was written: the agent's pass starts afresh (a delta's, from the store's copy of the base).
      if (e instanceof EngineLacksPack || e instanceof EngineBaseUnusable) return undefined;
      throw e;
    });
    if (result) {
      // The engine hashed its manifests as it wrote them (the record keeps those SHA-256: the next delta's kept base is
      // checked against it); the tree's is kept for the next delta (beside a layer, the engine wrote it there itself),
      // or the hash is not asked for.
      if (options.keep) await keepManifest(options.keep.dir, options.keep.id, result.manifest.treeSha256 ? { moved: engineKeptFile(options.keep) } : { from: options.manifestOut });
      else if (!result.manifest.layerOf) delete result.manifest.sha256;
      if (options.resultOut) await writeFile(options.resultOut, JSON.stringify(result));
      out.end();
      await finished(out);
      return result;
    }
  }
  return { ...(await singlePassInto(dir, archiveSink(format, out), options)), engine: "node" };
}

/** One read of `dir`: the walk names entries to tar, the tar stream is parsed and hashed, then goes to `sink`. */
export async function singlePassInto(dir: string, sink: TarSink, options: SinglePassOptions): Promise<SinglePassResult> {
  const started = performance.now();
  const walked: WalkEntry[] = [];
  let names: AsyncIterable<string> | Iterable<string>;
  let delta: SinglePassResult["delta"];
  let classified: ReturnType<typeof classifyByMetadata> | undefined;
  let walkMs = 0;
  if (options.base) {
    // A delta needs the whole walk before naming anything (hard-link groups, deletions); it is small work.
    // The base manifest is read (and parsed: ~0.15 s for 31k entries) while the tree is walked.
    const [entries, base] = await Promise.all([walkAll(dir, { exclude: options.selection?.exclude }).then((w) => ((walkMs = Math.round(performance.now() - started)), w)), typeof options.base === "function" ? options.base() : options.base]);
    walked.push(...entries);
    classified = classifyByMetadata(walked, base, { rehash: options.rehash });
    const baseFrom = options.baseFrom?.();
    const confirmed = await confirmSuspects(dir, classified);
    names = deltaList(walked, classified.changed);
    const changedBytes = walked.reduce((n, e) => n + (classified!.changed.has(e.path) && e.type === "file" ? e.size : 0), 0);
    delta = { changed: classified.changed.size, changedBytes, deleted: classified.deleted, suspects: confirmed.hashed, suspectBytes: confirmed.hashedBytes, planMs: Math.round(performance.now() - started), ...(baseFrom ? { baseFrom } : {}) };
  } else {
    // The walk runs while tar archives what it has named so far; walkMs is when it ended.
    names = namesOfFullWalk(dir, walked, () => (walkMs = Math.round(performance.now() - started)), options.selection?.exclude);
  }
  await rm(options.manifestOut, { force: true });
  // An earlier attempt's result (or recorded failure) must not speak for this one.
  if (options.resultOut) await rm(options.resultOut, { force: true });

  const tar = startTool(tarCreateFromStdinArgv(dir), { stdin: "pipe" });
  tar.child.stdin!.on("error", () => {}); // tar died early: its own exit says why
  const parsing = new TarManifestStream();
  const flows: Promise<unknown>[] = [feedNames(tar, names), pipeline(tar.child.stdout!, parsing), ...sink.flows(parsing)];
  try {
    await toolAndFlow(tar, Promise.all(flows));
  } catch (e) {
    const why = sourceChanged(e);
    await recordFailure(options, why, sink.readerLeft?.() ?? false);
    sink.abort();
    throw why;
  }

  const archived = new Map<string, ManifestEntry>(parsing.entries.map((e) => [e.path, e]));
  let entries: ManifestEntry[];
  if (classified) entries = mergeDeltaManifest(walked, classified.base, archived);
  else {
    entries = [];
    for (const w of walked) {
      if (w.socket) continue;
      const got = archived.get(w.path);
      // tar exited 0 yet left out a name it was given: never write a manifest that disagrees with the archive.
      if (!got) throw new AgentError("tool_failed", `tar did not archive ${w.path}, which the walk found`);
      entries.push({ ...got, stat: w.stat });
    }
  }
  const manifest: Manifest = { version: 1, entries, totals: totalsOf(entries), ...(options.selection ? { selection: options.selection.record() } : {}) };
  const layerOf = classified ? options.layerOver : undefined;
  const written = await writeManifestHashed(options.manifestOut, classified && layerOf ? deltaLayer(manifest, classified.base, classified.deleted, layerOf) : manifest);
  // The whole tree's manifest stays in the sandbox for the next delta: the file written, or (beside a layer) its JSON.
  let treeSha256: string | undefined;
  if (options.keep && layerOf) {
    const text = JSON.stringify(manifest);
    treeSha256 = createHash("sha256").update(text).digest("hex");
    await keepManifest(options.keep.dir, options.keep.id, { text });
  } else if (options.keep) await keepManifest(options.keep.dir, options.keep.id, { from: options.manifestOut });
  const result: SinglePassResult = {
    ...(await sink.written()),
    ms: Math.round(performance.now() - started),
    manifest: { totals: manifest.totals, entries: entries.length, jsonBytes: written.bytes, walkMs, ...(options.keep || layerOf ? { sha256: written.sha256 } : {}), ...(layerOf ? { layerOf } : {}), ...(treeSha256 ? { treeSha256 } : {}) },
    archived: { entries: parsing.entries.length, tarBytes: parsing.tarBytes },
    ...(delta ? { delta } : {}),
  };
  if (options.resultOut) await writeFile(options.resultOut, JSON.stringify(result));
  await sink.finish();
  return result;
}

/** The single-pass archive to a file; a failed archive leaves neither the file nor a manifest behind. */
export async function archiveWithManifestToFile(dir: string, format: TarFormat, output: string, options: SinglePassOptions): Promise<SinglePassResult> {
  if (output === dir || output.startsWith(dir + "/")) throw new AgentError("bad_request", "output: the archive cannot be written inside the tree it is made of", "output");
  return toFileOrNothing(output, (out) => archiveWithManifest(dir, format, out, options));
}
