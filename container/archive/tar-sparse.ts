// GNU tar's PAX 1.0 sparse files, decoded as they stream by (tar-manifest.ts feeds each entry's body here).
//
// Why 1.0 and not the old GNU 'S' headers: in 1.0 (`tar --format=posix --sparse --sparse-version=1.0`) the entry
// is an ordinary file to every tar reader, node-tar included. Its pax header says it is sparse (GNU.sparse.major=1,
// minor=0, the real name and size), and its body is the map, then the data:
//
//   "<n>\n" then n × ("<offset>\n" "<length>\n"), zero-padded to a 512-byte block   the map, in decimal
//   the n regions' bytes, one after another                                          the data
//
// Old GNU headers keep the map in the header block and in extension blocks that node-tar reads as the body, so
// decoding them would mean a tar parser of our own; 0.0 and 0.1 keep it in the pax header, where a long map
// does not fit. So the archiver writes 1.0 (tar-argv.ts), and an 'S' entry from an old archive is still hashed
// from disk after extraction (tar-manifest.ts `deferred`).
//
// The content hash is of the file as it reads back: zeros for every hole, then each region, zeros to the real
// size. `holes` is the bytes no region covers: what the manifest records so that a restore can check the holes
// came back as holes (tree-verify.ts).
import type { Hash } from "node:crypto";
import { AgentError } from "../http/agent-error.ts";

/** The GNU.sparse.* keys of a pax header, or undefined when it has none. */
export interface SparseHeader {
  name: string;
  realsize: number;
}

const ZEROS = Buffer.alloc(1 << 20);
/** A map longer than this is not a workspace's file: refuse it rather than hold it in memory. */
const MAX_MAP_BYTES = 16 << 20;

/** Reads the GNU.sparse keys of a raw pax extended header ("<len> key=value\n" records). */
export function sparseHeaderOf(pax: string): SparseHeader | undefined {
  const keys = new Map<string, string>();
  for (const m of pax.matchAll(/^\d+ (GNU\.sparse\.[a-z]+)=(.*)$/gm)) keys.set(m[1]!, m[2]!);
  if (!keys.size) return undefined;
  const [major, minor] = [keys.get("GNU.sparse.major"), keys.get("GNU.sparse.minor")];
  if (major !== "1" || minor !== "0") {
    throw new AgentError("tool_failed", `the tar stream holds a sparse file in GNU sparse format ${major ?? "0"}.${minor ?? "0/0.1"}; only 1.0 is read`);
  }
  const name = keys.get("GNU.sparse.name");
  const realsize = Number(keys.get("GNU.sparse.realsize"));
  if (!name || !Number.isSafeInteger(realsize) || realsize < 0) throw new AgentError("tool_failed", "the tar stream holds a sparse file whose pax header lacks its name or real size");
  return { name, realsize };
}

function hashZeros(hash: Hash, n: number) {
  while (n > 0) {
    const take = Math.min(n, ZEROS.length);
    hash.update(ZEROS.subarray(0, take));
    n -= take;
  }
}

/** One sparse entry's body: `write` each chunk as node-tar hands it, `end` when the entry ends. */
export class SparseBody {
  private map: Buffer[] = [];
  private mapBytes = 0;
  private regions: [offset: number, length: number][] | undefined;
  private region = 0;
  /** bytes of the current region already hashed */
  private inRegion = 0;
  /** logical offset in the file hashed so far */
  private pos = 0;
  /** data bytes the map declares */
  private dataBytes = 0;

  private readonly header: SparseHeader;
  private readonly hash: Hash;

  constructor(header: SparseHeader, hash: Hash) {
    this.header = header;
    this.hash = hash;
  }

  write(chunk: Buffer) {
    if (this.regions) return this.data(chunk);
    this.map.push(chunk);
    this.mapBytes += chunk.length;
    if (this.mapBytes > MAX_MAP_BYTES) throw new AgentError("tool_failed", `the sparse map of ${this.header.name} is over ${MAX_MAP_BYTES} bytes`);
    const text = Buffer.concat(this.map);
    const parsed = parseMap(text);
    if (!parsed) return;
    const padded = Math.ceil(parsed.end / 512) * 512;
    if (text.length < padded) return; // the map's padding is still to come
    this.regions = parsed.regions;
    this.dataBytes = parsed.regions.reduce((n, [, len]) => n + len, 0);
    let last = 0;
    for (const [off, len] of parsed.regions) {
      if (off < last || off + len > this.header.realsize) throw new AgentError("tool_failed", `the sparse map of ${this.header.name} has regions out of order or past its size`);
      last = off + len;
    }
    this.map = [];
    if (text.length > padded) this.data(text.subarray(padded));
  }

  private data(chunk: Buffer) {
    let at = 0;
    while (at < chunk.length) {
      const r = this.regions![this.region];
      if (!r) throw new AgentError("tool_failed", `the sparse file ${this.header.name} has more data than its map declares`);
      const [off, len] = r;
      if (this.pos < off) {
        hashZeros(this.hash, off - this.pos);
        this.pos = off;
      }
      const take = Math.min(len - this.inRegion, chunk.length - at);
      this.hash.update(chunk.subarray(at, at + take));
      at += take;
      this.inRegion += take;
      this.pos += take;
      if (this.inRegion === len) this.nextRegion();
    }
  }

  private nextRegion() {
    this.region++;
    this.inRegion = 0;
    // Empty regions (GNU tar ends a map with one at the real size) hold no data: step over them now.
    while (this.regions![this.region]?.[1] === 0) this.region++;
  }

  /** The entry ended: hash the trailing hole and answer the file's real size and its bytes in holes. */
  end(): { size: number; holes: number } {
    if (!this.regions) throw new AgentError("tool_failed", `the sparse file ${this.header.name} ended inside its map`);
    if (this.region === 0 && this.regions[0]?.[1] === 0) this.nextRegion();
    if (this.region < this.regions.length) throw new AgentError("tool_failed", `the sparse file ${this.header.name} ended before its data did`);
    hashZeros(this.hash, this.header.realsize - this.pos);
    return { size: this.header.realsize, holes: this.header.realsize - this.dataBytes };
  }
}

/** The map at the start of `text`, once all of its lines are there; `end` is the byte after its last newline. */
function parseMap(text: Buffer): { regions: [number, number][]; end: number } | undefined {
  const numbers: number[] = [];
  let start = 0;
  for (;;) {
    const nl = text.indexOf(0x0a, start);
    if (nl < 0) return undefined;
    const line = text.subarray(start, nl).toString("latin1");
    if (!/^\d{1,16}$/.test(line)) throw new AgentError("tool_failed", "the tar stream holds a sparse map that is not decimal numbers");
    numbers.push(Number(line));
    start = nl + 1;
    const n = numbers[0]!;
    if (numbers.length === 1 + 2 * n) {
      const regions: [number, number][] = [];
      for (let i = 0; i < n; i++) regions.push([numbers[1 + 2 * i]!, numbers[2 + 2 * i]!]);
      return { regions, end: start };
    }
  }
}
