// The streamed manifest reader (container/manifest/manifest-stream.ts) gives the entries JSON.parse would, however
// the bytes are cut into chunks (escapes, multi-byte names and the entries' nested objects across every boundary),
// refuses what is not a manifest naming why, and bounds one entry; the walk-order merge (sorted-match.ts) pairs
// entries out of order within its window and calls the rest differences.
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { keptManifest } from "../../container/manifest/manifest-kept.ts";
import { ENTRY_MAX_BYTES, manifestEntries } from "../../container/manifest/manifest-stream.ts";
import { SortedMatch } from "../../container/manifest/sorted-match.ts";
import type { Manifest, ManifestEntry } from "../../container/contract/protocol.ts";

const manifest: Manifest = {
  version: 1,
  entries: [
    { path: "a", type: "dir", mode: 0o755, size: 0, mtime: 1 },
    { path: 'a/quote " and \\ back', type: "file", mode: 0o644, size: 3, mtime: 2, sha256: "ab".repeat(32), stat: { ino: "1", dev: "2", mtimeNs: "3", ctimeNs: "4" } },
    { path: "a/é日本😀", type: "symlink", mode: 0o777, size: 5, mtime: 3, target: "},{\"path\":\"x\"}]" },
    { path: "b", type: "file", mode: 0o644, size: 3, mtime: 4, link: "a/quote \" and \\ back", uid: 0, gid: 0, holes: 4096 },
  ],
  totals: { files: 2, dirs: 1, symlinks: 1, bytes: 3 },
  selection: { excludes: ["*.log"], gitignore: false, excludeCaches: true, excluded: { "exclude *.log": 2 }, warnings: [] },
};

async function read(bytes: Buffer, cut: number[] = []): Promise<ManifestEntry[]> {
  const chunks: Buffer[] = [];
  let at = 0;
  for (const c of [...cut, bytes.length]) {
    chunks.push(bytes.subarray(at, c));
    at = c;
  }
  const out: ManifestEntry[] = [];
  for await (const e of manifestEntries((async function* () { yield* chunks; })(), "expected")) out.push(e);
  return out;
}

describe("manifestEntries", () => {
  it("gives JSON.parse's entries wherever the bytes are cut, in one, two or three chunks", async () => {
    const bytes = Buffer.from(JSON.stringify(manifest));
    expect(await read(bytes)).toEqual(manifest.entries);
    for (let i = 1; i < bytes.length; i++) {
      expect(await read(bytes, [i]), `cut at ${i}`).toEqual(manifest.entries);
      expect(await read(bytes, [i, Math.min(bytes.length, i + 7)]), `cut at ${i}, ${i + 7}`).toEqual(manifest.entries);
    }
  });

  it("reads whitespace, other key orders and an empty entries list", async () => {
    expect(await read(Buffer.from(JSON.stringify(manifest, null, 2)), [100])).toEqual(manifest.entries);
    expect(await read(Buffer.from(JSON.stringify({ totals: manifest.totals, entries: manifest.entries, version: 1 })))).toEqual(manifest.entries);
    expect(await read(Buffer.from('{"version":1,"entries":[],"totals":{"files":0,"dirs":0,"symlinks":0,"bytes":0}}'))).toEqual([]);
  });

  it("refuses what is not a manifest, naming why", async () => {
    const refused = (text: string) => read(Buffer.from(text)).then(() => "read", (e: Error) => e.message);
    expect(await refused("[1,2]")).toMatch(/not a JSON manifest \(not an object\)/);
    expect(await refused('{"version":1,"entries":[')).toMatch(/ends before its last/);
    expect(await refused(`${JSON.stringify(manifest)} x`)).toMatch(/bytes after the manifest's end/);
    expect(await refused('{"version":1,"entries":[{"path":"a","type":"file","mode":1,"size":"big","mtime":1}],"totals":{"files":0,"dirs":0,"symlinks":0,"bytes":0}}')).toMatch(/entries\.0\.size/);
    expect(await refused('{"version":1,"entries":[{"path":"a"},{oops}],"totals":{}}')).toMatch(/do not parse/);
    expect(await refused('{"version":1,"totals":{"files":0,"dirs":0,"symlinks":0,"bytes":0}}')).toMatch(/entries: missing/);
    expect(await refused('{"version":1,"entries":[],"totals":{"files":0}}')).toMatch(/not a manifest \(totals\.dirs/);
    expect(await refused('{"version":2,"base":"bk-base","entries":[],"removed":[],"opaque":[],"totals":{}}')).toMatch(/layer manifest \(over snapshot bk-base\) needs its base's manifest/);
  });

  it("bounds one entry carried across chunks to ENTRY_MAX_BYTES", async () => {
    const long = { path: "x".repeat(ENTRY_MAX_BYTES), type: "file", mode: 0, size: 0, mtime: 0 };
    const bytes = Buffer.from(JSON.stringify({ version: 1, entries: [long], totals: manifest.totals }));
    await expect(read(bytes, [30, 30 + ENTRY_MAX_BYTES + 1])).rejects.toThrow(/an entry passes 65536 bytes/);
    // Within one chunk an entry is bounded by the chunk (what the reader was handed already).
    expect(await read(bytes, [30, 40])).toHaveLength(1);
  });
});

describe("keptManifest", () => {
  it("reads a kept copy whose SHA-256 is the record's as any stored manifest: validated, so a forged one is passed over", async () => {
    const dir = mkdtempSync(join(tmpdir(), "kept-"));
    try {
      const keep = (id: string, text: string) => {
        writeFileSync(join(dir, `${id}.json`), text);
        return createHash("sha256").update(text).digest("hex");
      };
      expect(await keptManifest(dir, "bk-good", keep("bk-good", JSON.stringify(manifest)))).toEqual(manifest);
      const forged = JSON.stringify({ ...manifest, entries: [{ path: "a", type: "fifo", mode: "rwx" }] });
      expect(await keptManifest(dir, "bk-forged", keep("bk-forged", forged))).toBeUndefined();
      expect(await keptManifest(dir, "bk-good", "0".repeat(64))).toBeUndefined();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("SortedMatch", () => {
  const entry = (path: string): ManifestEntry => ({ path, type: "file", mode: 0, size: 0, mtime: 0 });
  async function match(expected: string[], actual: string[], window?: number) {
    const seen = { pairs: [] as string[], missing: [] as string[], extra: [] as string[] };
    // In batches of two, as a reader hands them on.
    const batches = Array.from({ length: Math.ceil(expected.length / 2) }, (_, i) => expected.slice(2 * i, 2 * i + 2).map(entry));
    const m = new SortedMatch<ManifestEntry>((async function* () { yield* batches; })(), {
      pair: (want, got) => seen.pairs.push(`${want.path}=${got.path}`),
      missing: (want) => seen.missing.push(want.path),
      extra: (got) => seen.extra.push(got.path),
    }, window);
    for (const p of actual) await m.add(entry(p));
    await m.finish();
    return seen;
  }

  it("pairs two walk-ordered streams, naming what only one side has", async () => {
    expect(await match(["a", "a/b", "a.txt", "c"], ["a", "a/b", "b", "c", "d"])).toEqual({ pairs: ["a=a", "a/b=a/b", "c=c"], missing: ["a.txt"], extra: ["b", "d"] });
  });

  it("pairs entries out of order within the window; further out they are differences, never a pass", async () => {
    // A byte sort puts U+FF01 before U+1F600; the walk (UTF-16) puts it after.
    expect(await match(["d/\u{ff01}", "d/\u{1f600}"], ["d/\u{1f600}", "d/\u{ff01}"])).toMatchObject({ missing: [], extra: [] });
    const names = Array.from({ length: 20 }, (_, i) => `f${String(i).padStart(2, "0")}`);
    // Reversed, with room for 4: the last four pair, the rest are missing from one side and extra on the other.
    expect(await match(names, [...names].reverse(), 4)).toMatchObject({ pairs: ["f19=f19", "f18=f18", "f17=f17", "f16=f16"], missing: names.slice(0, 16), extra: names.slice(0, 16).reverse() });
    expect(await match(names, [...names].reverse(), 32)).toMatchObject({ missing: [], extra: [] });
  });
});
