// Incrementals by metadata (container/archive/delta.ts through archiveWithManifest with a base): each kind of change is
// found and archived, unchanged files are not read (suspects counts every file the planner hashed), the delta's
// manifest equals a walk-and-hash of the tree, and base + deletions + delta extract to exactly that tree. Each case
// runs twice: by the agent's own pass, and by the native engine (snapflow-lazy pack) reading the base from a kept file.
import { createHash } from "node:crypto";
import { execFileSync } from "node:child_process";
import { chmodSync, linkSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, statSync, symlinkSync, unlinkSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeEach, describe, expect, it } from "vitest";
import { archiveWithManifestToFile, type SinglePassResult } from "../../container/archive/archive.ts";
import { removeEntries } from "../../container/archive/delta.ts";
import { compareManifests, takeManifest } from "../../container/manifest/manifest.ts";
import { ManifestSchema, type Manifest } from "../../container/contract/protocol.ts";

const zstd = { kind: "tar", compression: "zstd" } as const;
const work = mkdtempSync(join(tmpdir(), "snapflow-delta-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));
const readManifest = (file: string): Manifest => ManifestSchema.parse(JSON.parse(readFileSync(file, "utf8")));
const listing = (archive: string) => execFileSync("tar", ["-I", "zstd -d", "-tf", archive], { encoding: "utf8" }).split("\n").filter(Boolean).map((n) => n.replace(/^\.\//, "").replace(/\/$/, ""));

let n = 0;
let tree: string;
let base: Manifest;
let baseArchive: string;

/** A fresh tree and its full single-pass snapshot. */
async function snapshotFresh() {
  const dir = join(work, `case-${++n}`);
  tree = join(dir, "tree");
  mkdirSync(join(tree, "dir"), { recursive: true });
  writeFileSync(join(tree, "a.txt"), "alpha\n");
  writeFileSync(join(tree, "b.txt"), "bravo\n");
  writeFileSync(join(tree, "dir/c.txt"), "charlie\n");
  writeFileSync(join(tree, "h1"), "hard\n");
  linkSync(join(tree, "h1"), join(tree, "h2"));
  symlinkSync("a.txt", join(tree, "link"));
  baseArchive = join(dir, "base.tar.zst");
  await archiveWithManifestToFile(tree, zstd, baseArchive, { manifestOut: join(dir, "base.json") });
  base = readManifest(join(dir, "base.json"));
}

/**
 * The delta against `base` by `engine` (the native one reads the base from a file, as it reads the agent's kept copy);
 * checks its manifest against a walk-and-hash of the tree.
 */
async function deltaBy(engine: "native" | "node", options: { rehash?: boolean; against?: Manifest } = {}): Promise<SinglePassResult & { archived: string[]; manifest: Manifest; file: string }> {
  const file = join(tree, "..", `delta-${++n}.tar.zst`);
  const manifestOut = `${file}.json`;
  const against = options.against ?? base;
  let baseKept: { file: string; sha256: string } | undefined;
  if (engine === "native") {
    const text = JSON.stringify(against);
    baseKept = { file: `${file}.base.json`, sha256: createHash("sha256").update(text).digest("hex") };
    writeFileSync(baseKept.file, text);
  }
  const r = await archiveWithManifestToFile(tree, zstd, file, { manifestOut, base: against, rehash: options.rehash, engine, ...(baseKept ? { baseKept } : {}) });
  expect(r.engine).toBe(engine);
  const manifest = readManifest(manifestOut);
  expect(compareManifests(await takeManifest(tree), manifest)).toMatchObject({ equal: true });
  return { ...r, archived: listing(file), manifest, file };
}

describe.each(["node", "native"] as const)("incrementals by metadata (%s)", (engine) => {
  const delta = (options: Parameters<typeof deltaBy>[1] = {}) => deltaBy(engine, options);
  beforeEach(snapshotFresh);

  it("nothing changed: nothing archived, nothing read, the base's hashes kept", async () => {
    const d = await delta();
    expect(d.archived).toEqual([]);
    expect(d.delta).toMatchObject({ changed: 0, suspects: 0, deleted: [] });
    expect(d.manifest.entries.map(({ stat: _s, ...e }) => e)).toEqual(base.entries.map(({ stat: _s, ...e }) => e));
  });

  it("added: the new file and its directory", async () => {
    writeFileSync(join(tree, "dir/new.txt"), "new\n");
    const d = await delta();
    expect(d.archived).toEqual(["dir", "dir/new.txt"]);
    expect(d.delta!.suspects).toBe(0);
  });

  it("deleted: listed for removal; the directory it left is archived for its mtime", async () => {
    unlinkSync(join(tree, "dir/c.txt"));
    const d = await delta();
    expect(d.delta!.deleted).toEqual(["dir/c.txt"]);
    expect(d.archived).toEqual(["dir"]);
  });

  it("renamed: the new name archived, the old one deleted", async () => {
    renameSync(join(tree, "b.txt"), join(tree, "dir/b-moved.txt"));
    const d = await delta();
    expect(d.delta!.deleted).toEqual(["b.txt"]);
    expect(d.archived).toContain("dir/b-moved.txt");
    expect(d.archived).not.toContain("a.txt");
  });

  it("mode only: archived without reading its content first", async () => {
    chmodSync(join(tree, "a.txt"), 0o600);
    const d = await delta();
    expect(d.archived).toEqual(["a.txt"]);
    expect(d.delta!.suspects).toBe(0);
  });

  it("symlink target (same length, so only the target tells)", async () => {
    unlinkSync(join(tree, "link"));
    symlinkSync("b.txt", join(tree, "link"));
    const d = await delta();
    expect(d.archived).toContain("link");
    expect(d.manifest.entries.find((e) => e.path === "link")!.target).toBe("b.txt");
  });

  it("hard link added: the new name and the rest of its group, first name first", async () => {
    linkSync(join(tree, "a.txt"), join(tree, "a2"));
    const d = await delta();
    expect(d.archived).toEqual(["a.txt", "a2"]);
    expect(d.manifest.entries.find((e) => e.path === "a2")).toMatchObject({ link: "a.txt" });
  });

  it("hard link broken: the name that left the group archived as a file of its own (extraction replaces it)", async () => {
    unlinkSync(join(tree, "h2"));
    writeFileSync(join(tree, "h2"), "hard\n");
    const d = await delta();
    expect(d.archived).toEqual(["h2"]);
    expect(d.manifest.entries.find((e) => e.path === "h2")!.link).toBeUndefined();
  });

  it("content changed with size and mtime put back: the ctime gives it away, the hash confirms", async () => {
    const file = join(tree, "a.txt");
    const before = statSync(file);
    writeFileSync(file, "ALPHA\n");
    utimesSync(file, before.atime, before.mtime);
    const d = await delta();
    expect(d.delta!.suspects).toBe(1);
    expect(d.archived).toEqual(["a.txt"]);
  });

  it("only the ctime changed (content the same): hashed once, not archived", async () => {
    chmodSync(join(tree, "b.txt"), statSync(join(tree, "b.txt")).mode & 0o7777);
    writeFileSync(join(tree, "x"), "");
    unlinkSync(join(tree, "x"));
    utimesSync(join(tree, "b.txt"), statSync(join(tree, "b.txt")).atime, statSync(join(tree, "b.txt")).mtime);
    const d = await delta();
    expect(d.delta!.suspects).toBe(1);
    expect(d.archived).not.toContain("b.txt");
  });

  it("a base manifest of the old format (no lstat key): every file hashed once, only real changes archived", async () => {
    const was = statSync(join(tree, "b.txt"));
    writeFileSync(join(tree, "b.txt"), "BRAVO\n");
    utimesSync(join(tree, "b.txt"), was.atime, was.mtime);
    const old: Manifest = { ...base, entries: base.entries.map(({ stat: _s, ...e }) => e) };
    const d = await delta({ against: old });
    expect(d.delta!.suspects).toBe(4); // a.txt, b.txt (size and mtime equal: a suspect), dir/c.txt, h1
    // Of the files only the changed one; directories and symlinks without a key are archived (headers only).
    expect(d.archived).toEqual(["b.txt", "dir", "link"]);
    // Its manifest has the key again: the next incremental is metadata-only.
    expect(d.manifest.entries.every((e) => e.stat)).toBe(true);
  });

  it("rehash: true compares every file's content even when its metadata agrees", async () => {
    const d = await delta({ rehash: true });
    expect(d.delta!.suspects).toBe(4);
    expect(d.archived).toEqual([]);
  });

  it("base + deletions + delta extract to exactly the tree the delta's manifest describes", async () => {
    writeFileSync(join(tree, "dir/new.txt"), "new\n");
    unlinkSync(join(tree, "b.txt"));
    chmodSync(join(tree, "a.txt"), 0o640);
    linkSync(join(tree, "dir/c.txt"), join(tree, "c-again"));
    unlinkSync(join(tree, "h2"));
    writeFileSync(join(tree, "h2"), "hard, alone\n");
    unlinkSync(join(tree, "link"));
    symlinkSync("dir/c.txt", join(tree, "link"));
    const d = await delta();
    const out = join(tree, "..", "restored");
    mkdirSync(out);
    execFileSync("tar", ["--numeric-owner", "-p", "-I", "zstd -d", "-C", out, "-xf", baseArchive]);
    await removeEntries(out, d.delta!.deleted);
    execFileSync("tar", ["--numeric-owner", "-p", "-I", "zstd -d", "-C", out, "-xf", d.file]);
    expect(compareManifests(d.manifest, await takeManifest(out))).toMatchObject({ equal: true });
  });
});
