// A stored manifest read as a stream: its entries one at a time, each validated as it comes, so a reader holds one
// entry, not the manifest (a sandbox chooses its manifest; read whole, one of 430k entries grew the agent by ~370 MB).
//
// The format is what JSON.stringify and the engine's writer (native/lazy/internal/pack/manifest.go) write: one
// object, `{"version":1,"entries":[{…},{…},…],"totals":{…},"selection":{…}}`. The scanner follows only the
// structure (strings, nesting) and cuts the bytes at the top level and inside `entries`: each entry's bytes go to
// JSON.parse and zod on their own, and the other top-level fields (small) are collected and checked at the end.
// Why not a general streaming JSON parser from npm: none is installed, the shape is known and fixed (flat entry
// objects in one array), and cutting bytes then handing each entry to the runtime's own JSON.parse costs a byte
// scan plus what JSON.parse of the whole cost, where a tokenizer written in JS builds every value itself.
//
// Bounds: one entry is at most ENTRY_MAX_BYTES (its path and target are each under PATH_MAX), the other fields
// FIELD_MAX_BYTES together; the whole manifest is bounded by the caller (manifest-file.ts).
import { z } from "zod";
import { AgentError } from "../http/agent-error.ts";
import { ManifestEntry, ManifestTotals, SelectionRecord } from "../contract/protocol.ts";

/** One entry's JSON: path and target are each at most PATH_MAX (4096) bytes, with room for \u escapes of them. */
export const ENTRY_MAX_BYTES = 64 * 1024;
/** Everything but the entries: version, totals, a selection record (at most 64 excludes and their counts). */
const FIELD_MAX_BYTES = 1 << 20;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const isSpace = (b: number) => b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09;
/** The bytes the scanner acts on outside strings; everything else (numbers, literals, ':', spaces) it passes over. */
const STRUCTURAL = new Uint8Array(256);
for (const b of [QUOTE, COMMA, OPEN_OBJECT, CLOSE_OBJECT, OPEN_ARRAY, CLOSE_ARRAY]) STRUCTURAL[b] = 1;

/** What a version 1 manifest holds besides its entries. */
const Head = z.object({ version: z.literal(1), totals: ManifestTotals, selection: SelectionRecord.optional() });
export type ManifestHead = z.infer<typeof Head>;

/**
 * `entries`: one or more whole entries' JSON, comma-separated; `parsed`: whole entries, parsed already (the fast
 * path below); `field`: one `"key":value` of the top level.
 */
type Piece = { kind: "entries" | "field"; text: string } | { kind: "parsed"; entries: unknown[] };

/** Between two entries, as JSON.stringify and the engine write them. */
const BETWEEN = Buffer.from("},{");

/**
 * Cuts a manifest's bytes into its entries' JSON and its other fields' JSON (`"key":value`), as they arrive.
 * Structure only: the pieces are parsed by the caller.
 */
export class ManifestScanner {
  private depth = 0;
  private inString = false;
  private escaped = false;
  private done = false;
  private inEntries = false;
  /** an `entries` array was met */
  sawEntries = false;
  /** the top-level field just read was `entries`: nothing of it to hand on */
  private skipField = false;
  /** the bytes of the piece being read, from earlier chunks; and where it starts in this one */
  private saved: Buffer[] = [];
  private savedBytes = 0;
  private from = -1;
  private fieldBytes = 0;

  private readonly field: string;

  constructor(field: string) {
    this.field = field;
  }

  private fail(why: string): never {
    throw new AgentError("bad_request", `${this.field}: not a JSON manifest (${why})`, this.field);
  }

  /**
   * The pieces that end in `chunk`. Inside the entries, a chunk is first cut at its last "},{" and the entries
   * before it parsed at once, unscanned: if that parses as a list of values, the cut lies between two entries (a cut
   * inside a string or an object leaves one open, which does not parse). Otherwise (no such cut, or one inside a
   * string), the bytes since the last cut are scanned.
   */
  push(chunk: Buffer): Piece[] {
    if (!this.inEntries) return this.scan(chunk);
    const cut = chunk.lastIndexOf(BETWEEN);
    if (cut !== -1) {
      const head = chunk.subarray(0, cut + 1);
      let entries: unknown[] | undefined;
      try {
        entries = JSON.parse(`[${(this.saved.length ? Buffer.concat([...this.saved, head]) : head).toString("utf8")}]`) as unknown[];
      } catch {
        entries = undefined;
      }
      if (entries) {
        this.reset(0);
        this.keep(chunk.subarray(cut + 2));
        return [{ kind: "parsed", entries }];
      }
    }
    return this.rescan(chunk);
  }

  /** Scans the bytes since the last cut between entries (kept unscanned by push) and `chunk`. */
  private rescan(chunk: Buffer): Piece[] {
    const bytes = this.saved.length ? Buffer.concat([...this.saved, chunk]) : chunk;
    this.depth = 2;
    this.inString = false;
    this.escaped = false;
    this.reset(0);
    return this.scan(bytes);
  }

  /** The pieces that end in `chunk`, byte by byte: the whole entries in it at once, and fields. */
  private scan(chunk: Buffer): Piece[] {
    const out: Piece[] = [];
    const n = chunk.length;
    let i = 0;
    /** the last comma between two entries in this chunk: the entries before it are whole */
    let lastComma = -1;
    // Bytes as one-byte characters: the offsets are the bytes', and V8's own string search finds quotes fast
    // (every byte of a UTF-8 sequence is ≥ 0x80, so none is taken for a quote or a backslash).
    const str = chunk.toString("latin1");
    /** the next backslash at or after i (escapes are rare: looked for again only once passed) */
    let slash = str.indexOf("\\");
    while (i < n) {
      if (this.inString) {
        if (this.escaped) {
          this.escaped = false;
          i++;
          continue;
        }
        if (slash !== -1 && slash < i) slash = str.indexOf("\\", i);
        const quote = str.indexOf('"', i);
        if (slash !== -1 && (quote === -1 || slash < quote)) {
          this.escaped = true;
          i = slash + 1;
          continue;
        }
        if (quote === -1) break;
        this.inString = false;
        i = quote + 1;
        continue;
      }
      const b = str.charCodeAt(i);
      if (!STRUCTURAL[b] && this.depth > 0) {
        i++;
        continue;
      }
      if (this.done) {
        if (!isSpace(b)) this.fail("bytes after the manifest's end");
      } else if (b === QUOTE) {
        this.inString = true;
        if (this.depth === 0) this.fail("not an object");
      } else if (b === OPEN_OBJECT || b === OPEN_ARRAY) {
        if (this.depth === 0) {
          if (b !== OPEN_OBJECT) this.fail("not an object");
          this.from = i + 1;
        } else if (this.depth === 1 && b === OPEN_ARRAY && !this.inEntries && /^\s*"entries"\s*:\s*$/.test(this.text(chunk, i))) {
          // The entries: cut between elements from here on.
          this.inEntries = true;
          this.sawEntries = true;
          this.skipField = true;
          this.reset(i + 1);
        }
        this.depth++;
      } else if (b === COMMA || b === CLOSE_OBJECT || b === CLOSE_ARRAY) {
        const closes = b !== COMMA;
        if (this.depth === 2 && this.inEntries) {
          if (!closes) lastComma = i;
          else {
            if (b !== CLOSE_ARRAY) this.fail("entries is not an array");
            const text = this.text(chunk, i);
            this.inEntries = false;
            if (text.trim()) out.push({ kind: "entries", text });
            this.reset(-1);
            lastComma = -1;
          }
        } else if (this.depth === 1) {
          if (closes && b !== CLOSE_OBJECT) this.fail("mismatched brackets");
          const text = this.skipField ? "" : this.text(chunk, i);
          this.skipField = false;
          if (text.trim()) {
            this.fieldBytes += text.length;
            if (this.fieldBytes > FIELD_MAX_BYTES) this.fail(`its fields besides entries pass ${FIELD_MAX_BYTES} bytes`);
            out.push({ kind: "field", text });
          }
          this.reset(closes ? -1 : i + 1);
          if (closes) this.done = true;
        }
        if (closes) this.depth--;
      } else if (this.depth === 0 && !isSpace(b)) {
        this.fail("not an object");
      }
      i++;
    }
    if (this.inEntries && lastComma !== -1) {
      out.push({ kind: "entries", text: this.text(chunk, lastComma) });
      this.reset(lastComma + 1);
    }
    if (this.from !== -1 && this.from < n) this.keep(chunk.subarray(this.from));
    if (this.from !== -1) this.from = 0;
    return out;
  }

  /** The manifest ended: what is left (the last entries and the fields after them); it must have been one whole object. */
  end(): Piece[] {
    const out = this.inEntries && this.saved.length ? this.rescan(Buffer.alloc(0)) : [];
    if (!this.done) this.fail("it ends before its last '}'");
    return out;
  }

  private keep(bytes: Buffer) {
    this.savedBytes += bytes.length;
    const max = this.inEntries ? ENTRY_MAX_BYTES : FIELD_MAX_BYTES;
    if (this.savedBytes > max) this.fail(`${this.inEntries ? "an entry" : "a field"} passes ${max} bytes`);
    // Copied: the chunk's buffer may be reused by the stream that lent it.
    this.saved.push(Buffer.from(bytes));
  }

  /** The piece from its start to `end` (exclusive) in this chunk. */
  private text(chunk: Buffer, end: number): string {
    const tail = this.from === -1 ? chunk.subarray(0, 0) : chunk.subarray(this.from, end);
    const bytes = this.saved.length ? Buffer.concat([...this.saved, tail]) : tail;
    // Entries come cut by chunk (bounded by its size); only the part carried over from earlier chunks is one entry.
    if (!this.inEntries && bytes.length > FIELD_MAX_BYTES) this.fail(`a field passes ${FIELD_MAX_BYTES} bytes`);
    return bytes.toString("utf8");
  }

  private reset(from: number) {
    this.saved = [];
    this.savedBytes = 0;
    this.from = from;
  }
}

function entryOf(json: unknown, field: string, index: number): ManifestEntry {
  const result = ManifestEntry.safeParse(json);
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  throw new AgentError("bad_request", `${field}: not a manifest (entries.${index}.${issue.path.join(".")}: ${issue.message})`, field);
}

/** Whole entries' JSON, comma-separated, as one array: one JSON.parse for a chunk's worth of entries. */
function entriesOf(text: string, field: string, index: number): unknown[] {
  try {
    return JSON.parse(`[${text}]`) as unknown[];
  } catch {
    throw new AgentError("bad_request", `${field}: not a JSON manifest (the entries from entries.${index} on do not parse)`, field);
  }
}

/** The fields besides entries, checked once they are all read (version 1; a layer is named as such). */
function checkHead(fields: string[], sawEntries: boolean, field: string): ManifestHead {
  let head: Record<string, unknown>;
  try {
    head = JSON.parse(`{${fields.join(",")}}`) as Record<string, unknown>;
  } catch {
    throw new AgentError("bad_request", `${field}: not a JSON manifest`, field);
  }
  if (head.version === 2) {
    throw new AgentError("bad_request", `${field}: a layer manifest (over snapshot ${String(head.base)}) needs its base's manifest beside it (${field}.base)`, `${field}.base`);
  }
  if (!sawEntries) throw new AgentError("bad_request", `${field}: not a manifest (entries: missing)`, field);
  const result = Head.safeParse(head);
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  throw new AgentError("bad_request", `${field}: not a manifest (${issue.path.join(".")}: ${issue.message})`, field);
}

/**
 * The entries of a version 1 manifest, from its bytes, in batches (a chunk's worth: the unit a reader is handed and
 * hands on, so the passes pay one await per chunk, not per entry), each entry validated as it comes; the rest of
 * the manifest is checked when its bytes end (an invalid one throws then, after its entries: a caller acts on what
 * it read only once the generator has finished).
 */
export async function* manifestBatches(bytes: AsyncIterable<Uint8Array>, field: string, onHead?: (head: ManifestHead) => void): AsyncGenerator<ManifestEntry[]> {
  const scanner = new ManifestScanner(field);
  const fields: string[] = [];
  let index = 0;
  const entriesIn = (pieces: Piece[]): ManifestEntry[] => {
    const out: ManifestEntry[] = [];
    for (const piece of pieces) {
      if (piece.kind === "field") fields.push(piece.text);
      else for (const json of piece.kind === "parsed" ? piece.entries : entriesOf(piece.text, field, index)) out.push(entryOf(json, field, index++));
    }
    return out;
  };
  for await (const chunk of bytes) {
    const batch = entriesIn(scanner.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength)));
    if (batch.length) yield batch;
  }
  const last = entriesIn(scanner.end());
  if (last.length) yield last;
  const head = checkHead(fields, scanner.sawEntries, field);
  onHead?.(head);
}

/** The same, one entry at a time. */
export async function* manifestEntries(bytes: AsyncIterable<Uint8Array>, field: string, onHead?: (head: ManifestHead) => void): AsyncGenerator<ManifestEntry> {
  for await (const batch of manifestBatches(bytes, field, onHead)) yield* batch;
}
