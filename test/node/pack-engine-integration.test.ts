// The native backup engine (`snapflow-lazy pack`, native/lazy/internal/pack) against the agent's own single pass
// (tar → node-tar → zstd, container/archive/archive.ts singlePassInto) on the same trees: the two manifests are
// equal entry by entry (order, fields, the walk's lstat key, holes, totals, the selection's record); GNU tar lists and
// extracts the engine's archive into the tree again (content, modes, mtimes, links, holes); the agent's in-stream
// restore check accepts it; a name that is not UTF-8 is refused as the agent refuses it.
import { execFileSync, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync, writeSync, closeSync, ftruncateSync, linkSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { archiveWithManifestToFile } from "../../container/archive/archive.ts";
import { compileSelection } from "../../container/archive/selection.ts";
import { extractFromFile } from "../../container/extract/extract.ts";
import { generateDataset } from "../../container/system/dataset.ts";
import { takeManifest, compareManifests } from "../../container/manifest/manifest.ts";
import { ManifestSchema, type Manifest, type TarFormat } from "../../container/contract/protocol.ts";
import { AgentError } from "../../container/http/agent-error.ts";

const ZSTD: TarFormat = { kind: "tar", compression: "zstd" };
const readManifest = (file: string): Manifest => ManifestSchema.parse(JSON.parse(readFileSync(file, "utf8")));
const MiB = 1 << 20;

let base: string;
let src: string;

beforeAll(async () => {
  base = mkdtempSync(join(tmpdir(), "snapflow-pack-"));
  src = join(base, "src");
  await generateDataset(src, { kind: "tricky", seed: 11, replace: true });
  const more = join(src, "more");
  mkdirSync(join(more, "cache"), { recursive: true });
  // Names whose UTF-16 order differs from their UTF-8 byte order (U+FF01 and an emoji), and a NUL-free oddity.
  for (const name of ["！full", "😀emoji", "a", "B", "é", "z-last", "<&>"]) writeFileSync(join(more, name), name);
  // A sparse file ending in a hole, one that is all hole, and an empty file.
  const fd = openSync(join(more, "sparse.img"), "w");
  writeSync(fd, Buffer.alloc(70_000, 7), 0, 70_000, 3 * MiB);
  ftruncateSync(fd, 8 * MiB);
  closeSync(fd);
  const hole = openSync(join(more, "hole-only"), "w");
  ftruncateSync(hole, 2 * MiB);
  closeSync(hole);
  writeFileSync(join(more, "empty"), "");
  // Hard links across directories, a FIFO, nanosecond and pre-1970 mtimes, a symlink out of the tree.
  writeFileSync(join(more, "linked"), "one inode, three names");
  linkSync(join(more, "linked"), join(more, "cache", "linked-2"));
  linkSync(join(more, "linked"), join(more, "linked-3"));
  execFileSync("mkfifo", [join(more, "fifo")]);
  utimesSync(join(more, "a"), 1_700_000_000.123456, 1_700_000_000.123456);
  utimesSync(join(more, "B"), -5, -5);
  symlinkSync("/etc/passwd", join(more, "outside"));
  writeFileSync(join(more, "cache", "CACHEDIR.TAG"), "Signature: 8a477f597d28d172789f06886806bc55\n");
  mkdirSync(join(more, "logs"));
  writeFileSync(join(more, "logs", "x.log"), "log");
});
afterAll(() => rmSync(base, { recursive: true, force: true }));

/** Both passes over `dir` (same options); their manifests and results. */
async function bothPasses(dir: string, name: string, selectionSpec?: Parameters<typeof compileSelection>[1]) {
  const run = async (engine: "native" | "node") => {
    const manifestOut = join(base, `${name}-${engine}.json`);
    const archive = join(base, `${name}-${engine}.tar.zst`);
    const selection = await compileSelection(dir, selectionSpec, { git: null });
    const result = await archiveWithManifestToFile(dir, ZSTD, archive, { manifestOut, engine, selection });
    return { result, manifest: readManifest(manifestOut), archive };
  };
  return { native: await run("native"), node: await run("node") };
}

describe("snapflow-lazy pack, against the agent's own single pass", () => {
  it("makes the same manifest, entry by entry, and an archive GNU tar extracts into the same tree", async () => {
    const { native, node } = await bothPasses(src, "whole");
    expect(native.result.engine).toBe("native");
    expect(node.result.engine).toBe("node");
    expect(native.manifest.entries.map((e) => e.path)).toEqual(node.manifest.entries.map((e) => e.path));
    for (let i = 0; i < node.manifest.entries.length; i++) expect(native.manifest.entries[i]).toEqual(node.manifest.entries[i]);
    expect(native.manifest).toEqual(node.manifest);
    // Holes as the filesystem reports them: all but the blocks under the 70,000 written bytes.
    expect(native.manifest.entries.find((e) => e.path === "more/sparse.img")?.holes).toBeGreaterThan(8 * MiB - 128 * 1024);
    expect(native.manifest.entries.find((e) => e.path === "more/hole-only")).toMatchObject({ holes: 2 * MiB, size: 2 * MiB });
    expect(native.result.manifest).toEqual(node.result.manifest === undefined ? undefined : { ...node.result.manifest, walkMs: native.result.manifest.walkMs });
    expect(native.result.bytes).toBe(statSync(native.archive).size);

    // GNU tar reads it: the listing names every entry, and the extracted tree is the manifest's.
    const listed = execFileSync("tar", ["-I", "zstd -d", "-tf", native.archive], { encoding: "utf8" }).split("\n").filter(Boolean).map((p) => p.replace(/^\.\//, "").replace(/\/$/, ""));
    expect(listed).toEqual(native.manifest.entries.map((e) => e.path));
    const out = join(base, "whole-out");
    mkdirSync(out);
    execFileSync("tar", ["--numeric-owner", "-p", "-C", out, "-I", "zstd -d", "-xf", native.archive]);
    const extracted = await takeManifest(out, { holes: true });
    expect(compareManifests(native.manifest, extracted, 20, ["type", "mode", "size", "mtime", "target", "sha256", "link", "holes"])).toMatchObject({ equal: true });
    expect(statSync(join(out, "more/sparse.img")).blocks * 512).toBeLessThan(MiB);
  });

  it("makes the same manifest for the fidelity tree (foreign owners, set-id bits, xattrs, a FIFO, a socket, ns mtimes, a 255-byte name)", async () => {
    const tree = join(base, "fidelity");
    await generateDataset(tree, { kind: "tricky", seed: 5, replace: true });
    execFileSync("python3", [join(import.meta.dirname, "../fixtures/fidelity-tree.py"), "make", tree]);
    const { native, node } = await bothPasses(tree, "fidelity");
    expect(native.result.engine).toBe("native");
    expect(native.manifest).toEqual(node.manifest);
    expect(native.manifest.entries.some((e) => e.path.length >= 255)).toBe(true);
  });

  it("is accepted by the agent's verified extract (node-tar's in-stream check of every entry)", async () => {
    const manifestOut = join(base, "verified.json");
    const archive = join(base, "verified.tar.zst");
    await archiveWithManifestToFile(src, ZSTD, archive, { manifestOut, engine: "native" });
    const into = join(base, "verified-out");
    mkdirSync(into);
    const r = await extractFromFile(archive, ZSTD, into, { expected: readManifest(manifestOut), complete: true });
    // A difference would have failed it (verify_failed); every entry was checked in the stream, then walked.
    expect(r).toMatchObject({ equal: true, verified: { content: "in-stream", entries: readManifest(manifestOut).entries.length, metadata: "walk" } });
  });

  it("leaves out what the selection excludes, and records it as the agent does", async () => {
    const spec = { excludes: ["*.log", "more/！full", "**/emoji*"], gitignore: false, excludeCaches: true };
    const { native, node } = await bothPasses(src, "selected", spec);
    expect(native.result.engine).toBe("native");
    expect(native.manifest.entries).toEqual(node.manifest.entries);
    expect(native.manifest.selection).toEqual(node.manifest.selection);
    expect(native.manifest.selection?.excluded).toEqual({ "exclude *.log": 1, "exclude more/！full": 1, "CACHEDIR.TAG": 1 });
    expect(native.manifest.entries.some((e) => e.path.startsWith("more/cache"))).toBe(false);
  });

  it("without the binary on PATH the agent's own pass makes the default (same manifest)", async () => {
    const path = process.env.PATH;
    process.env.PATH = (path ?? "").split(":").filter((d) => !d.endsWith("native/lazy/bin")).join(":");
    try {
      const manifestOut = join(base, "fallback.json");
      const r = await archiveWithManifestToFile(src, ZSTD, join(base, "fallback.tar.zst"), { manifestOut, engine: "native" });
      expect(r.engine).toBe("node");
      expect(readManifest(manifestOut).entries).toEqual(readManifest(join(base, "whole-native.json")).entries);
    } finally {
      process.env.PATH = path;
    }
  });

  it("with a snapflow-lazy that has no pack (an older image's) the agent's own pass makes it, from the start", async () => {
    // The real binary, asked for a subcommand it does not know, as a build from before pack would be asked for pack.
    const older = join(base, "older-bin");
    mkdirSync(older);
    const real = execFileSync("sh", ["-c", "command -v snapflow-lazy"], { encoding: "utf8" }).trim();
    writeFileSync(join(older, "snapflow-lazy"), `#!/bin/sh\n[ "$1" = pack ] && shift && exec ${real} pack-unknown "$@"\nexec ${real} "$@"\n`, { mode: 0o755 });
    const path = process.env.PATH;
    process.env.PATH = `${older}:${path}`;
    try {
      const manifestOut = join(base, "older.json");
      const archive = join(base, "older.tar.zst");
      const r = await archiveWithManifestToFile(src, ZSTD, archive, { manifestOut, engine: "native" });
      expect(r.engine).toBe("node");
      expect(r.bytes).toBe(statSync(archive).size);
      expect(readManifest(manifestOut).entries).toEqual(readManifest(join(base, "whole-native.json")).entries);
    } finally {
      process.env.PATH = path;
    }
  });

  it("refuses a name that is not UTF-8 as the agent does (bad_request on path), leaving no manifest", async () => {
    const odd = join(base, "odd");
    mkdirSync(join(odd, "d"), { recursive: true });
    writeFileSync(join(odd, "ok"), "fine");
    const made = spawnSync("sh", ["-c", `printf x > "$(printf '${join(odd, "d")}/bad\\377name')"`]);
    expect(made.status).toBe(0);
    const manifestOut = join(base, "odd.json");
    const err = await archiveWithManifestToFile(odd, ZSTD, join(base, "odd.tar.zst"), { manifestOut, engine: "native" }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AgentError);
    expect(err).toMatchObject({ code: "bad_request", field: "path", message: expect.stringContaining(`${join(odd, "d")} holds a name that is not UTF-8`) });
    expect(() => statSync(manifestOut)).toThrow();
  });
});
