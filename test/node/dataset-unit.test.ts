// Deterministic datasets (container/system/dataset.ts), generated for real into temporary directories and compared by
// manifest: the same seed gives the same tree (names, bytes, modes and mtimes, directories included, even when
// generated in a later second), another seed another tree; the node-modules kind meets its file count and byte
// target; the tricky kind holds a really sparse file and the cases it promises.
import { lstatSync, mkdtempSync, readlinkSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { generateDataset, prng } from "../../container/system/dataset.ts";
import { compareManifests, takeManifest } from "../../container/manifest/manifest.ts";

const spec = { kind: "node-modules", seed: 11, files: 300, bytes: 3_000_000 } as const;

let base: string;
beforeAll(() => {
  base = mkdtempSync(join(tmpdir(), "snapflow-dataset-"));
});
afterAll(() => rmSync(base, { recursive: true, force: true }));

describe("node-modules datasets", () => {
  it("the same seed gives identical manifests, even generated in a later second", async () => {
    const a = join(base, "a");
    const b = join(base, "b");
    await generateDataset(a, spec);
    // Anything stamped with the wall clock instead of the seed would show up as an mtime difference.
    await sleep(1100);
    await generateDataset(b, spec);
    const [ma, mb] = [await takeManifest(a), await takeManifest(b)];
    const r = compareManifests(ma, mb);
    expect(r.differences).toEqual([]);
    expect(r.equal).toBe(true);
    expect(mb.entries).toEqual(ma.entries);
  });

  it("another seed gives another tree", async () => {
    const a = join(base, "seed-a");
    const b = join(base, "seed-b");
    await generateDataset(a, spec);
    await generateDataset(b, { ...spec, seed: 12 });
    const [ma, mb] = [await takeManifest(a), await takeManifest(b)];
    expect(compareManifests(ma, mb).equal).toBe(false);
    // Not just a few names: the content differs throughout.
    const hashesA = new Set(ma.entries.map((e) => e.sha256).filter(Boolean));
    const shared = mb.entries.filter((e) => e.sha256 && hashesA.has(e.sha256)).length;
    expect(shared).toBeLessThan(mb.totals.files / 10);
  });

  it("has exactly `files` files and total bytes within 1% of `bytes`, as the result says", async () => {
    for (const s of [spec, { ...spec, seed: 3, files: 1000, bytes: 5_000_000 }]) {
      const dir = join(base, `size-${s.seed}`);
      const result = await generateDataset(dir, s);
      const m = await takeManifest(dir);
      expect(result.files).toBe(s.files);
      expect(m.totals.files).toBe(s.files);
      expect(m.totals.bytes).toBe(result.bytes);
      expect(Math.abs(m.totals.bytes - s.bytes) / s.bytes).toBeLessThan(0.01);
      // Looks like a JS workspace: most files under node_modules/, a .git with pack files.
      expect(m.entries.filter((e) => e.type === "file" && e.path.startsWith("node_modules/")).length).toBeGreaterThan(s.files * 0.8);
      expect(m.entries.filter((e) => e.path.startsWith(".git/objects/pack/") && e.type === "file")).toHaveLength(3);
    }
  });
});

describe("tricky dataset", () => {
  let dir: string;
  beforeAll(async () => {
    dir = join(base, "tricky");
    await generateDataset(dir, { kind: "tricky", seed: 5 });
  });

  it("holds a sparse file whose allocated blocks are far smaller than its size", () => {
    const st = statSync(join(dir, "sparse.img"));
    expect(st.size).toBe(8 * 2 ** 20);
    expect(st.blocks * 512).toBeLessThan(st.size / 64);
  });

  it("holds the promised symlinks, hard link, empty entries and modes", () => {
    expect(readlinkSync(join(dir, "dangling-link"))).toBe("does/not/exist");
    expect(readlinkSync(join(dir, "link-to-dir"))).toBe("unicode");
    expect(readlinkSync(join(dir, "absolute-link"))).toBe("/snapflow/elsewhere");
    const plain = lstatSync(join(dir, "plain.txt"));
    expect(lstatSync(join(dir, "hard-link-to-plain")).ino).toBe(plain.ino);
    expect(plain.nlink).toBe(2);
    expect(statSync(join(dir, "empty-file")).size).toBe(0);
    expect(statSync(join(dir, "empty-dir/nested-empty")).isDirectory()).toBe(true);
    expect(statSync(join(dir, "secret/only-me")).mode & 0o7777).toBe(0o600);
    expect(statSync(join(dir, "private-dir")).mode & 0o7777).toBe(0o700);
    expect(statSync(join(dir, "bin/run.sh")).mode & 0o7777).toBe(0o755);
  });

  it("the same seed gives the same content (mtimes are not part of its promise)", async () => {
    const again = join(base, "tricky-again");
    await generateDataset(again, { kind: "tricky", seed: 5 });
    const strip = (m: Awaited<ReturnType<typeof takeManifest>>) => m.entries.map(({ mtime: _, ...e }) => e);
    expect(strip(await takeManifest(again))).toEqual(strip(await takeManifest(dir)));
  });
});

describe("prng", () => {
  it("is deterministic per seed and spreads over [0, 1)", () => {
    const a = prng(42);
    const b = prng(42);
    const xs = Array.from({ length: 1000 }, () => a());
    expect(Array.from({ length: 1000 }, () => b())).toEqual(xs);
    expect(Math.min(...xs)).toBeGreaterThanOrEqual(0);
    expect(Math.max(...xs)).toBeLessThan(1);
    expect(xs.reduce((s, x) => s + x, 0) / xs.length).toBeGreaterThan(0.45);
    expect(xs.reduce((s, x) => s + x, 0) / xs.length).toBeLessThan(0.55);
    expect(prng(43)()).not.toBe(prng(42)());
  });
});

describe("added-data datasets (snapshot-create-restore-benchmark.md's shapes)", () => {
  it("add the requested bytes, incompressible, in files of at most 256 MiB, deterministically", async () => {
    const { execFileSync } = await import("node:child_process");
    const { readFileSync } = await import("node:fs");
    const added = { kind: "added-data", seed: 5, files: 200, bytes: 2_000_000, addedBytes: 12_000_000 } as const;
    const a = join(base, "added-a");
    const made = await generateDataset(a, added);
    expect(made.bytes).toBeGreaterThanOrEqual(14_000_000 * 0.99);
    const blob = join(a, "added/blob-0000.bin");
    expect(statSync(blob).size).toBe(12_000_000);
    // zstd cannot shrink it: the seed's archives grew by about the added size.
    const compressed = execFileSync("zstd", ["-3", "-c", blob], { maxBuffer: 64 * 2 ** 20 });
    expect(compressed.length).toBeGreaterThan(12_000_000 * 0.99);
    const b = join(base, "added-b");
    await generateDataset(b, added);
    expect(readFileSync(join(b, "added/blob-0000.bin")).equals(readFileSync(blob))).toBe(true);
  });
});
