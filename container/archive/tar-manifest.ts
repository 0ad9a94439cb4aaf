// The manifest of a tar stream, made as the stream passes: a pass-through that hands every chunk on untouched
// (to the compressor on backup, to `tar x` on restore) and feeds the same chunk to node-tar's Parser, which
// cuts it into entries; each regular file's content is hashed as it goes by. So the manifest describes exactly
// the bytes that were archived (or extracted), and nobody reads the tree a second time.
//
// With `expected` (a restore), each entry is compared with the expected manifest as it ends: content hash,
// type, mode, size, mtime, symlink target and hard-link name. The differences are collected, not thrown, so
// the caller can name the first ones; `complete` also reports expected entries the archive never held. The
// expected manifest is read as a stream beside the archive, both in walk order (a single-pass archive's order is
// its manifest's), and paired by a merge (manifest/sorted-match.ts): neither the manifest nor the archive's
// entries are held, so a restore's memory does not follow the entry count.
//
// Why node-tar: it is the parser npm itself uses, maintained, and synchronous when its entries are consumed
// synchronously (as here), so every byte written to it is parsed and hashed before the chunk is passed on.
// It reads GNU long names and pax headers; GNU tar's PAX 1.0 sparse files (what the archivers write: tar-argv.ts)
// reach it as ordinary files whose body is a map and the data, which tar-sparse.ts decodes from the raw pax header
// node-tar hands over (`meta`): the hash is of the file as it reads back, and the entry records its `holes`.
// Old GNU sparse entries ('S', from archives made before) are skipped by node-tar; such an entry is listed in
// `deferred` instead, and the extractor hashes that one file from disk once tar has written it.
import { createHash } from "node:crypto";
import { Transform, type TransformCallback } from "node:stream";
import { Parser, type ReadEntry } from "tar";
import { AgentError } from "../http/agent-error.ts";
import { SparseBody, sparseHeaderOf, type SparseHeader } from "./tar-sparse.ts";
import type { Difference, EntryType, Manifest, ManifestEntry } from "../contract/protocol.ts";
import { readerOf, type ManifestReader } from "../manifest/manifest-file.ts";
import { SortedMatch } from "../manifest/sorted-match.ts";

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
  expected?: Manifest | ManifestReader;
  /** with `expected`: the archive must hold every expected entry (a full snapshot; a delta layer holds some) */
  complete?: boolean;
  /** how many differences to keep (all are counted) */
  limit?: number;
}

/** An archived entry on its way to the merge; a GNU sparse one is compared once hashed from disk. */
type Archived = ManifestEntry & { sparseDeferred?: true };

export class TarManifestStream extends Transform {
  /** archived entries, in archive order (without `expected`: a restore keeps only their count) */
  readonly entries: ManifestEntry[] = [];
  /** how many entries the archive held */
  count = 0;
  /** tar bytes that passed */
  tarBytes = 0;
  readonly differences: Difference[] = [];
  /** GNU sparse files: archived, but their content could not be hashed in the stream (see the header) */
  readonly deferred: { entry: ManifestEntry; want: ManifestEntry | undefined }[] = [];
  readonly counts = { missing: 0, extra: 0, changed: 0 };
  private readonly parser: Parser;
  private readonly match: SortedMatch<Archived> | undefined;
  /** entries ended since the merge last ran (it reads the manifest, so it runs between chunks) */
  private arrived: Archived[] = [];
  private readonly options: TarManifestOptions;
  private readonly sizeOf = new Map<string, number>();
  private open = 0;
  private failure: Error | undefined;
  /** the GNU.sparse keys of the pax header just read: they belong to the next entry */
  private sparse: SparseHeader | undefined;
  /** only zero bytes so far: an archive of nothing is all zero blocks, which node-tar calls unrecognized */
  private allZero = true;

  constructor(options: TarManifestOptions = {}) {
    super({ highWaterMark: 1 << 20 });
    this.options = options;
    if (options.expected) {
      const expected = options.expected;
      const wanted = ("batches" in expected ? expected : readerOf(expected)).batches();
      this.match = new SortedMatch<Archived>(wanted, {
        pair: (want, got) => {
          if (got.sparseDeferred) return void this.deferred.push({ entry: got, want });
          // A hard link's size is its first name's, which was compared when it passed.
          if (got.link !== undefined && got.link === want.link) got.size = want.size;
          const d = compareEntry(want, got);
          if (d) this.note(d);
        },
        missing: (want) => {
          if (this.options.complete) this.note({ path: want.path, kind: "missing" });
        },
        extra: (got) => (got.sparseDeferred ? this.deferred.push({ entry: got, want: undefined }) : this.note({ path: got.path, kind: "extra" })),
      });
    }
    this.parser = new Parser({ strict: true, onReadEntry: (e) => this.onEntry(e) });
    this.parser.on("ignoredEntry", (e: ReadEntry) => this.onSparse(e));
    // Every pax header (and GNU long name) comes through here, raw, before the entry it describes.
    this.parser.on("meta", (raw: string) => {
      try {
        this.sparse = sparseHeaderOf(raw) ?? this.sparse;
      } catch (e) {
        this.failure ??= e as Error;
      }
    });
    const fail = (message: string) => {
      if (this.allZero && this.count === 0 && /Unrecognized archive format/.test(message)) return;
      this.failure ??= new AgentError("tool_failed", `the tar stream does not parse: ${message}`);
    };
    this.parser.on("error", (e: Error) => fail(e.message));
    // strict: a warning about the stream itself (bad checksum, truncation) is a failure.
    this.parser.on("warn", (code: string, message: string | Error) => fail(`${code} ${message instanceof Error ? message.message : message}`));
  }

  private onEntry(e: ReadEntry) {
    const kind = typeOf(e.type);
    const sparse = this.sparse;
    this.sparse = undefined;
    if (sparse && kind !== "file") this.failure ??= new AgentError("tool_failed", `the tar stream gives sparse-file keys to ${e.path}, which is not a file`);
    const path = entryPath(sparse?.name ?? e.path);
    const entry: ManifestEntry = {
      path,
      type: kind === "link" ? "file" : kind,
      mode: (e.mode ?? 0) & 0o7777,
      size: kind === "file" ? (sparse?.realsize ?? e.size) : 0,
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
    this.count++;
    if (!this.match) this.entries.push(entry);
    this.open++;
    if (kind === "file" && sparse) {
      if (!this.match) this.sizeOf.set(path, sparse.realsize);
      const hash = createHash("sha256");
      const body = new SparseBody(sparse, hash);
      const failed = (err: unknown) => (this.failure ??= err as Error);
      e.on("data", (c: Buffer) => {
        try {
          body.write(c);
        } catch (err) {
          failed(err);
        }
      });
      e.on("end", () => {
        try {
          const { size, holes } = body.end();
          entry.size = size;
          if (holes > 0) entry.holes = holes;
        } catch (err) {
          failed(err);
        }
        entry.sha256 = hash.digest("hex");
        this.ended(entry);
      });
    } else if (kind === "file") {
      if (!this.match) this.sizeOf.set(path, e.size);
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
    this.count++;
    if (!this.match) {
      this.entries.push(entry);
      this.deferred.push({ entry, want: undefined });
    } else this.arrived.push({ ...entry, sparseDeferred: true });
  }

  /** Compare a deferred (sparse) entry once its content has been hashed from disk. */
  settleDeferred(entry: ManifestEntry, want: ManifestEntry | undefined) {
    if (!this.match) return;
    if (!want) return this.note({ path: entry.path, kind: "extra" });
    const d = compareEntry(want, entry);
    if (d) this.note(d);
  }

  private ended(entry: ManifestEntry) {
    this.open--;
    // "" is the archive's root ("./"): the restore target itself, whose metadata no manifest holds.
    if (!this.match || entry.path === "") return;
    this.arrived.push(entry);
  }

  /** Pairs the entries that ended with the manifest's (read as far as they reach). */
  private async merge(): Promise<void> {
    const arrived = this.arrived;
    this.arrived = [];
    for (const entry of arrived) {
      const reading = this.match!.add(entry);
      if (reading) await reading;
    }
  }

  private note(d: Difference) {
    this.counts[d.kind]++;
    if (this.differences.length < (this.options.limit ?? 20)) this.differences.push(d);
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback) {
    this.tarBytes += chunk.length;
    if (this.allZero && this.count === 0) this.allZero = chunk.every((b) => b === 0);
    this.parser.write(chunk);
    if (!this.arrived.length || this.failure) return done(this.failure ?? null, chunk);
    this.merge().then(() => done(this.failure ?? null, chunk), (e: Error) => done(e));
  }

  override _flush(done: TransformCallback) {
    this.parser.end();
    if (!this.failure && this.open !== 0) this.failure = new AgentError("tool_failed", `the tar stream ended inside an entry (${this.open} unfinished)`);
    if (this.failure || !this.match) return done(this.failure ?? null);
    this.merge().then(() => this.match!.finish()).then(() => done(this.failure ?? null), (e: Error) => done(e));
  }

  /** Whether the stream matched `expected` (always true without one). */
  get equal(): boolean {
    return this.counts.missing + this.counts.extra + this.counts.changed === 0;
  }
}
