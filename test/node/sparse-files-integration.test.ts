// Sparse files on the tar paths (issue 22): the single-pass archiver (container/archive/archive.ts) writes them as GNU
// PAX 1.0 sparse entries, its in-stream parser (tar-manifest.ts + tar-sparse.ts) hashes their real content and
// records their holes in the manifest, the verified extract (extract.ts) brings them back with their holes, and
// the tree check (tree-verify.ts) calls a restored file that came back dense a difference.
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, statSync, writeSync, closeSync, ftruncateSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { archiveWithManifestToFile } from "../../container/archive/archive.ts";
import { extractFromFile } from "../../container/extract/extract.ts";
import { takeManifest } from "../../container/manifest/manifest.ts";
import { ManifestSchema, type Manifest, type TarFormat } from "../../container/contract/protocol.ts";
import { checkTree } from "../../container/manifest/tree-verify.ts";

const MiB = 1 << 20;
let base: string;
let src: string;

/** A file of `size` bytes with `regions` written ([offset, bytes]) and holes everywhere else. */
function sparseFile(path: string, size: number, regions: [number, Buffer][]) {
  const fd = openSync(path, "w");
  for (const [offset, bytes] of regions) writeSync(fd, bytes, 0, bytes.length, offset);
  ftruncateSync(fd, size);
  closeSync(fd);
}
const allocated = (path: string) => statSync(path).blocks * 512;
const sha256 = (path: string) => createHash("sha256").update(readFileSync(path)).digest("hex");

beforeAll(() => {
  base = mkdtempSync(join(tmpdir(), "snapflow-sparse-"));
  src = join(base, "src");
  mkdirSync(join(src, "d"), { recursive: true });
  // 64 MiB with 6 bytes in the middle: what issue 22 saw come back as 64 MiB of real blocks.
  sparseFile(join(src, "big.img"), 64 * MiB, [[32 * MiB, Buffer.from("middle")]]);
  // Many regions (more than an old GNU header holds), one at the very end: the map and the data cross chunks.
  sparseFile(join(src, "d/many.img"), 40 * MiB, Array.from({ length: 9 }, (_, i) => [i * 4 * MiB + 1234, Buffer.alloc(70_000 + i, i + 1)] as [number, Buffer]).concat([[40 * MiB - 5, Buffer.from("tail!")]]));
  // Nothing but a hole.
  sparseFile(join(src, "d/hole-only"), 16 * MiB, []);
  execFileSync("sh", ["-c", `head -c 100000 /dev/urandom > ${join(src, "dense.bin")}`]);
});
afterAll(() => rmSync(base, { recursive: true, force: true }));

const format: TarFormat = { kind: "tar", compression: "zstd" };

describe("sparse files through the single-pass archive and the verified extract", () => {
  let manifest: Manifest;
  const archive = () => join(base, "a.tar.zst");

  it("the manifest hashes each sparse file's real content and records its holes", async () => {
    const manifestOut = join(base, "m.json");
    await archiveWithManifestToFile(src, format, archive(), { manifestOut });
    manifest = ManifestSchema.parse(JSON.parse(readFileSync(manifestOut, "utf8")));
    const byPath = new Map(manifest.entries.map((e) => [e.path, e]));
    for (const p of ["big.img", "d/many.img", "d/hole-only", "dense.bin"]) {
      expect(byPath.get(p), p).toMatchObject({ size: statSync(join(src, p)).size, sha256: sha256(join(src, p)) });
    }
    expect(byPath.get("big.img")!.holes).toBeGreaterThan(63 * MiB);
    expect(byPath.get("d/many.img")!.holes).toBeGreaterThan(39 * MiB);
    expect(byPath.get("d/hole-only")!.holes).toBe(16 * MiB);
    expect(byPath.get("dense.bin")!.holes).toBeUndefined();
    // The archive holds the data, not the holes.
    expect(statSync(archive()).size).toBeLessThan(4 * MiB);
  });

  it("the verified extract brings the holes back, and the walk compares them", async () => {
    const dst = join(base, "dst");
    const r = await extractFromFile(archive(), format, dst, { expected: manifest });
    expect(r).toMatchObject({ equal: true, verified: { metadata: "walk" } });
    expect(allocated(join(dst, "big.img"))).toBeLessThan(MiB);
    expect(allocated(join(dst, "d/many.img"))).toBeLessThan(2 * MiB);
    expect(allocated(join(dst, "d/hole-only"))).toBeLessThan(MiB);
    expect((await checkTree(dst, manifest)).verified.sparse).toBe("compared");
  });

  it("a restored sparse file that came back dense is a difference naming its holes", async () => {
    const dense = join(base, "dense-copy");
    execFileSync("cp", ["-a", "--sparse=never", src, dense]);
    expect(allocated(join(dense, "big.img"))).toBeGreaterThanOrEqual(64 * MiB);
    const c = await checkTree(dense, manifest);
    expect(c.equal).toBe(false);
    expect(c.differences.map((d) => [d.path, d.fields?.[0]?.name])).toEqual(expect.arrayContaining([["big.img", "holes"], ["d/many.img", "holes"], ["d/hole-only", "holes"]]));
    // Where a materialization cannot report holes, the restore says so and does not compare them.
    expect(await checkTree(dense, manifest, { sparse: false })).toMatchObject({ equal: true, verified: { sparse: "not-compared" } });
  });

  it("a walk-and-hash manifest (the images' second pass) records holes too, and a manifest without them still parses", async () => {
    const taken = await takeManifest(src, { holes: true });
    expect(taken.entries.find((e) => e.path === "big.img")!.holes).toBeGreaterThan(63 * MiB);
    expect(taken.entries.find((e) => e.path === "dense.bin")!.holes).toBeUndefined();
    const old = { ...manifest, entries: manifest.entries.map(({ holes: _holes, ...e }) => e) };
    expect(ManifestSchema.parse(old).entries.every((e) => e.holes === undefined)).toBe(true);
    expect((await checkTree(join(base, "dense-copy"), old)).equal).toBe(true);
  });
});
