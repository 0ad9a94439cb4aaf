// The manifest of a tar stream, made as the stream passes: a pass-through that hands every chunk on untouched
// (to the compressor on backup, to `tar x` on restore) and feeds the same chunk to node-tar's Parser, which
// cuts it into entries; each regular file's content is hashed as it goes by. So the manifest describes exactly
// the bytes that were archived (or extracted), and nobody reads the tree a second time.
//
// With `expected` (a restore), each entry is compared with the expected manifest as it ends: content hash,
// type, mode, size, mtime, symlink target and hard-link name. The differences are collected, not thrown, so
// the caller can name the first ones; `complete` also reports expected entries the archive never held.
//
// Why node-tar: it is the parser npm itself uses, maintained, and synchronous when its entries are consumed
// synchronously (as here), so every byte written to it is parsed and hashed before the chunk is passed on.
// It reads GNU long names and pax headers but not GNU sparse maps (tar --sparse, which the seed-era archivers
// use): node-tar skips a sparse entry's body. Such an entry is listed in `deferred` instead, and the extractor
// hashes that one file from disk once tar has written it (sparse files are rare; everything else is hashed in
// the stream). The single-pass archiver runs tar without --sparse, so its archives defer nothing.
import { createHash } from "node:crypto";
import { Transform, type TransformCallback } from "node:stream";
import { Parser, type ReadEntry } from "tar";
import { AgentError } from "../http/agent-error.ts";
import type { Difference, EntryType, Manifest, ManifestEntry } from "../contract/protocol.ts";

/** Fields compared between an archived entry and its expected manifest entry (stat never: it is the source's). */
export const CONTENT_FIELDS = ["type", "mode", "size", "mtime", "target", "sha256", "link"] as const satisfies (keyof ManifestEntry)[];

function typeOf(t: ReadEntry["type"]): EntryType | "link" {
  switch (t) {
    case "File":
    case "OldFile":
    case "ContiguousFile":
      return "file";
    case "Link":
      return "link";
    case "Directory":
      return "dir";
    case "SymbolicLink":
      return "symlink";
    default:
      return "other";
  }
}

/** "./a/b/" → "a/b": tar names entries as it was given them (./path), directories with a trailing slash. */
export function entryPath(name: string): string {
  let p = name.startsWith("./") ? name.slice(2) : name;
  while (p.endsWith("/")) p = p.slice(0, -1);
  return p;
}

export function compareEntry(want: ManifestEntry, got: ManifestEntry): Difference | undefined {
  const fields = CONTENT_FIELDS.filter((name) => !(name === "mtime" && want.type === "symlink"))
    .filter((name) => want[name] !== got[name])
    .map((name) => ({ name, expected: want[name], actual: got[name] }));
  return fields.length ? { path: want.path, kind: "changed", fields } : undefined;
}

export interface TarManifestOptions {
  /** restore: compare each entry with this manifest as it ends */
  expected?: Manifest;
  /** with `expected`: the archive must hold every expected entry (a full snapshot; a delta layer holds some) */
  complete?: boolean;
  /** how many differences to keep (all are counted) */
  limit?: number;
}

export class TarManifestStream extends Transform {
  /** archived entries, in archive order */
  readonly entries: ManifestEntry[] = [];
  /** tar bytes that passed */
  tarBytes = 0;
  readonly differences: Difference[] = [];
  /** GNU sparse files: archived, but their content could not be hashed in the stream (see the header) */
  readonly deferred: { entry: ManifestEntry; want: ManifestEntry | undefined }[] = [];
  readonly counts = { missing: 0, extra: 0, changed: 0 };
  private readonly parser: Parser;
  private readonly expected: Map<string, ManifestEntry> | undefined;
  private readonly options: TarManifestOptions;
  private readonly sizeOf = new Map<string, number>();
  private open = 0;
  private failure: Error | undefined;
  /** only zero bytes so far: an archive of nothing is all zero blocks, which node-tar calls unrecognized */
  private allZero = true;

  constructor(options: TarManifestOptions = {}) {
    super({ highWaterMark: 1 << 20 });
    this.options = options;
    this.expected = options.expected ? new Map(options.expected.entries.map((e) => [e.path, e])) : undefined;
    this.parser = new Parser({ strict: true, onReadEntry: (e) => this.onEntry(e) });
    this.parser.on("ignoredEntry", (e: ReadEntry) => this.onSparse(e));
    const fail = (message: string) => {
      if (this.allZero && this.entries.length === 0 && /Unrecognized archive format/.test(message)) return;
      this.failure ??= new AgentError("tool_failed", `the tar stream does not parse: ${message}`);
    };
    this.parser.on("error", (e: Error) => fail(e.message));
    // strict: a warning about the stream itself (bad checksum, truncation) is a failure.
    this.parser.on("warn", (code: string, message: string | Error) => fail(`${code} ${message instanceof Error ? message.message : message}`));
  }

  private onEntry(e: ReadEntry) {
    const kind = typeOf(e.type);
    const path = entryPath(e.path);
    const entry: ManifestEntry = {
      path,
      type: kind === "link" ? "file" : kind,
      mode: (e.mode ?? 0) & 0o7777,
      size: kind === "file" ? e.size : 0,
      mtime: Math.floor((e.mtime?.getTime() ?? 0) / 1000),
      uid: e.uid ?? 0,
      gid: e.gid ?? 0,
    };
    if (kind === "symlink") {
      entry.target = e.linkpath ?? "";
      // As lstat has it: a symlink's size is its target's length in bytes.
      entry.size = Buffer.byteLength(entry.target);
    }
    if (kind === "link") {
      entry.link = entryPath(e.linkpath ?? "");
      entry.size = this.sizeOf.get(entry.link) ?? 0;
    }
    if (kind === "other") entry.size = e.size;
    this.entries.push(entry);
    this.open++;
    if (kind === "file") {
      this.sizeOf.set(path, e.size);
      const hash = createHash("sha256");
      e.on("data", (c: Buffer) => hash.update(c));
      e.on("end", () => {
        entry.sha256 = hash.digest("hex");
        this.ended(entry);
      });
    } else {
      e.on("end", () => this.ended(entry));
      e.resume();
    }
  }

  private onSparse(e: ReadEntry) {
    if (e.type !== "SparseFile") return;
    const path = entryPath(e.path);
    const entry: ManifestEntry = { path, type: "file", mode: (e.mode ?? 0) & 0o7777, size: 0, mtime: Math.floor((e.mtime?.getTime() ?? 0) / 1000), uid: e.uid ?? 0, gid: e.gid ?? 0 };
    this.entries.push(entry);
    const want = this.expected?.get(path);
    this.expected?.delete(path);
    this.deferred.push({ entry, want });
  }

  /** Compare a deferred (sparse) entry once its content has been hashed from disk. */
  settleDeferred(entry: ManifestEntry, want: ManifestEntry | undefined) {
    if (!this.expected) return;
    if (!want) return this.note({ path: entry.path, kind: "extra" });
    const d = compareEntry(want, entry);
    if (d) this.note(d);
  }

  private ended(entry: ManifestEntry) {
    this.open--;
    // "" is the archive's root ("./"): the restore target itself, whose metadata no manifest holds.
    if (!this.expected || entry.path === "") return;
    const want = this.expected.get(entry.path);
    if (!want) return this.note({ path: entry.path, kind: "extra" });
    this.expected.delete(entry.path);
    const d = compareEntry(want, entry);
    if (d) this.note(d);
  }

  private note(d: Difference) {
    this.counts[d.kind]++;
    if (this.differences.length < (this.options.limit ?? 20)) this.differences.push(d);
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback) {
    this.tarBytes += chunk.length;
    if (this.allZero && this.entries.length === 0) this.allZero = chunk.every((b) => b === 0);
    this.parser.write(chunk);
    done(this.failure ?? null, chunk);
  }

  override _flush(done: TransformCallback) {
    this.parser.end();
    if (!this.failure && this.open !== 0) this.failure = new AgentError("tool_failed", `the tar stream ended inside an entry (${this.open} unfinished)`);
    if (!this.failure && this.options.complete && this.expected) {
      for (const path of this.expected.keys()) this.note({ path, kind: "missing" });
    }
    done(this.failure ?? null);
  }

  /** Whether the stream matched `expected` (always true without one). */
  get equal(): boolean {
    return this.counts.missing + this.counts.extra + this.counts.changed === 0;
  }
}
