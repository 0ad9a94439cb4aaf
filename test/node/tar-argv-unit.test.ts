// tar's argv for every format (container/archive/tar-argv.ts): the exact create/extract command lines, compressor and
// decompressor programs (zstd decompression always accepts --long windows), file extensions; then every
// compressor line is run for real, the way `tar -I` runs it, to check the tools accept the options we build.
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import type { TarFormat } from "../../container/contract/protocol.ts";
import { archiveExtension, compressProgram, decompressProgram, tarCreateArgv, tarCreateFromStdinArgv, tarExtractArgv, tarExtractPlainArgv } from "../../container/archive/tar-argv.ts";

const f = (compression: TarFormat["compression"], extra: Partial<TarFormat> = {}): TarFormat => ({ kind: "tar", compression, ...extra });
const onPath = (tool: string) => spawnSync("sh", ["-c", `command -v ${tool}`]).status === 0;

describe("tarCreateArgv / tarExtractArgv", () => {
  it("none: plain tar, numeric owners, sparse on create, permissions kept on extract", () => {
    expect(tarCreateArgv("/w/app", f("none"))).toEqual(["tar", "--numeric-owner", "--sparse", "-C", "/w/app", "-cf", "-", "."]);
    expect(tarExtractArgv("/w/out", f("none"))).toEqual(["tar", "--numeric-owner", "-p", "-C", "/w/out", "-xf", "-"]);
  });

  it.each<[TarFormat, string, string]>([
    [f("zstd"), "zstd -3 -T0", "zstd -d -T0 --long=31"],
    [f("zstd", { level: 19, threads: 4, long: true }), "zstd -19 -T4 --long=27", "zstd -d -T4 --long=31"],
    [f("zstd", { level: 1, long: false }), "zstd -1 -T0", "zstd -d -T0 --long=31"],
    [f("gzip"), "gzip -6", "gzip -d"],
    [f("gzip", { level: 9 }), "gzip -9", "gzip -d"],
    [f("pigz"), "pigz -6", "pigz -d"],
    [f("pigz", { level: 1, threads: 8 }), "pigz -1 -p 8", "pigz -d"],
    [f("lz4"), "lz4 -1", "lz4 -d"],
    [f("lz4", { level: 9 }), "lz4 -9", "lz4 -d"],
  ])("%j → -I '%s' / -I '%s'", (format, compress, decompress) => {
    expect(compressProgram(format)).toBe(compress);
    expect(decompressProgram(format)).toBe(decompress);
    expect(tarCreateArgv("/src", format)).toEqual(["tar", "--numeric-owner", "--sparse", "-C", "/src", "-I", compress, "-cf", "-", "."]);
    expect(tarExtractArgv("/dst", format)).toEqual(["tar", "--numeric-owner", "-p", "-C", "/dst", "-I", decompress, "-xf", "-"]);
  });

  it("zstd's decompressor always accepts long windows, whatever the archive was made with", () => {
    for (const long of [undefined, false, true]) expect(decompressProgram(f("zstd", { long }))).toContain("--long=31");
  });

  it("zstd's negative (fast) levels use --fast=N, which zstd accepts (it refuses '--3')", () => {
    expect(compressProgram(f("zstd", { level: -3 }))).toBe("zstd --fast=3 -T0");
    expect(compressProgram(f("zstd", { level: -7, long: true }))).toBe("zstd --fast=7 -T0 --long=27");
  });

  it("archive extensions", () => {
    expect(["none", "zstd", "gzip", "pigz", "lz4"].map((c) => archiveExtension(f(c as TarFormat["compression"])))).toEqual(["tar", "tar.zst", "tar.gz", "tar.gz", "tar.lz4"]);
  });
});

describe("the programs run", () => {
  const input = Buffer.concat([randomBytes(100_000), Buffer.alloc(200_000, "abc")]);
  const formats: TarFormat[] = [
    f("zstd"), f("zstd", { level: 19, threads: 2, long: true }), f("zstd", { level: -5 }),
    f("gzip"), f("gzip", { level: 1 }), f("pigz"), f("pigz", { level: 9, threads: 2 }), f("lz4"), f("lz4", { level: 9 }),
  ];
  for (const format of formats) {
    const tool = format.compression;
    it.skipIf(!onPath(tool))(`${JSON.stringify(format)} round-trips bytes through the real ${tool} (skipped if ${tool} is not on PATH)`, () => {
      // `tar -I PROG` runs PROG to compress and `PROG -d` to decompress.
      const packed = spawnSync("sh", ["-c", compressProgram(format)!], { input, maxBuffer: 64 * 2 ** 20 });
      expect(packed.status, packed.stderr.toString()).toBe(0);
      expect(packed.stdout.length).toBeLessThan(input.length);
      const unpacked = spawnSync("sh", ["-c", `${decompressProgram(format)!} -d`], { input: packed.stdout, maxBuffer: 64 * 2 ** 20 });
      expect(unpacked.status, unpacked.stderr.toString()).toBe(0);
      expect(unpacked.stdout.equals(input)).toBe(true);
    });
  }
});

describe("single-pass argv (tar reads names from stdin; the agent compresses)", () => {
  it("create: exactly the NUL-separated names on stdin, in order, no recursion, names never options, no --sparse", () => {
    expect(tarCreateFromStdinArgv("/w/app")).toEqual(["tar", "--numeric-owner", "-C", "/w/app", "--no-recursion", "--null", "--verbatim-files-from", "-T", "-", "-cf", "-"]);
  });
  it("extract: a plain tar from stdin (decompressed by the agent), permissions kept", () => {
    expect(tarExtractPlainArgv("/w/out")).toEqual(["tar", "--numeric-owner", "-p", "-C", "/w/out", "-xf", "-"]);
  });
});
