// Manifests (container/manifest/manifest.ts) of small real trees: what takeManifest records for files, directories,
// symlinks, hard links, modes and mtimes (and the streamed hash of a file above 1 MiB); and what
// compareManifests reports for each kind of difference, including the limit on listed differences.
import { createHash, randomBytes } from "node:crypto";
import { chmodSync, linkSync, lutimesSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, unlinkSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { compareManifests, takeManifest, type Manifest } from "../../container/manifest/manifest.ts";

const T = 1_700_000_000;
const sha = (b: Buffer | string) => createHash("sha256").update(b).digest("hex");

/** The same small tree, byte for byte, mode for mode and mtime for mtime, wherever it is built. */
function buildTree(root: string, big: Buffer) {
  mkdirSync(join(root, "dir/sub"), { recursive: true });
  mkdirSync(join(root, "empty"));
  writeFileSync(join(root, "a.txt"), "hello");
  writeFileSync(join(root, "dir/b.bin"), Buffer.from([0, 1, 2, 255]));
  writeFileSync(join(root, "dir/run.sh"), "#!/bin/sh\n");
  writeFileSync(join(root, "dir/sub/big.bin"), big);
  writeFileSync(join(root, "z-empty"), "");
  chmodSync(join(root, "a.txt"), 0o644);
  chmodSync(join(root, "dir/b.bin"), 0o600);
  chmodSync(join(root, "dir/run.sh"), 0o755);
  symlinkSync("a.txt", join(root, "link"));
  linkSync(join(root, "a.txt"), join(root, "hard"));
  for (const f of ["a.txt", "dir/b.bin", "dir/run.sh", "dir/sub/big.bin", "z-empty"]) utimesSync(join(root, f), T + 0.7, T + 0.7);
  // Directories last: creating entries changes their mtimes.
  for (const d of ["dir/sub", "dir", "empty"]) utimesSync(join(root, d), T, T);
}

describe("takeManifest", () => {
  let base: string;
  let root: string;
  let big: Buffer;
  let m: Manifest;

  beforeAll(async () => {
    base = mkdtempSync(join(tmpdir(), "snapflow-manifest-"));
    root = join(base, "tree");
    big = randomBytes(1.5 * 2 ** 20);
    buildTree(root, big);
    m = await takeManifest(root);
  });
  afterAll(() => rmSync(base, { recursive: true, force: true }));

  it("lists every entry but the root, depth-first in sorted order, with '/'-separated relative paths", () => {
    expect(m.version).toBe(1);
    expect(m.entries.map((e) => e.path)).toEqual(["a.txt", "dir", "dir/b.bin", "dir/run.sh", "dir/sub", "dir/sub/big.bin", "empty", "hard", "link", "z-empty"]);
  });

  it("records type, permission bits, size, whole-second mtime, owner and content hash of files", () => {
    const byPath = new Map(m.entries.map((e) => [e.path, e]));
    const owner = { uid: process.getuid!(), gid: process.getgid!() };
    expect(byPath.get("a.txt")).toEqual({ path: "a.txt", type: "file", mode: 0o644, size: 5, mtime: T, ...owner, sha256: sha("hello") });
    expect(byPath.get("dir/b.bin")).toMatchObject({ type: "file", mode: 0o600, size: 4, sha256: sha(Buffer.from([0, 1, 2, 255])) });
    expect(byPath.get("dir/run.sh")).toMatchObject({ type: "file", mode: 0o755 });
    expect(byPath.get("z-empty")).toMatchObject({ type: "file", size: 0, sha256: sha("") });
    // Above 1 MiB the file is hashed as a stream: same answer.
    expect(byPath.get("dir/sub/big.bin")).toMatchObject({ size: big.length, sha256: sha(big) });
    expect(byPath.get("dir")).toEqual({ path: "dir", type: "dir", mode: expect.any(Number), size: 0, mtime: T, ...owner });
    expect(byPath.get("empty")).toMatchObject({ type: "dir", size: 0, mtime: T });
  });

  it("records symlinks by target, without following them", () => {
    const link = m.entries.find((e) => e.path === "link")!;
    expect(link).toMatchObject({ type: "symlink", target: "a.txt", size: "a.txt".length });
    expect(link.sha256).toBeUndefined();
  });

  it("records a hard link's later name as a link to the first, without hashing it again or counting its bytes", () => {
    const hard = m.entries.find((e) => e.path === "hard")!;
    expect(hard).toMatchObject({ type: "file", link: "a.txt", size: 5 });
    expect(hard.sha256).toBeUndefined();
    expect(m.entries.find((e) => e.path === "a.txt")!.link).toBeUndefined();
    expect(m.totals).toEqual({ files: 6, dirs: 3, symlinks: 1, bytes: 5 + 4 + "#!/bin/sh\n".length + big.length + 0 });
  });

  it("hash: false leaves out content hashes", async () => {
    const plain = await takeManifest(root, { hash: false });
    expect(plain.entries.filter((e) => e.sha256 !== undefined)).toEqual([]);
    expect(plain.entries.map((e) => e.path)).toEqual(m.entries.map((e) => e.path));
  });
});

describe("compareManifests", () => {
  let base: string;
  let big: Buffer;
  let n = 0;
  const fresh = () => {
    const root = join(base, `t${n++}`);
    buildTree(root, big);
    return root;
  };

  beforeAll(() => {
    base = mkdtempSync(join(tmpdir(), "snapflow-compare-"));
    big = randomBytes(1.2 * 2 ** 20);
  });
  afterAll(() => rmSync(base, { recursive: true, force: true }));

  it("two trees built alike are equal, symlink mtimes aside", async () => {
    const a = fresh();
    const b = fresh();
    lutimesSync(join(b, "link"), T - 1000, T - 1000); // restoring symlink mtimes is not required
    const r = compareManifests(await takeManifest(a), await takeManifest(b));
    expect(r).toEqual({ equal: true, counts: { missing: 0, extra: 0, changed: 0 }, differences: [] });
  });

  it("reports changed content, mode, mtime and symlink target field by field; missing and extra entries by path", async () => {
    const expected = await takeManifest(fresh());
    const root = fresh();
    writeFileSync(join(root, "a.txt"), "HELLO"); // same size, other bytes
    utimesSync(join(root, "a.txt"), T, T);
    chmodSync(join(root, "dir/run.sh"), 0o644);
    utimesSync(join(root, "dir/b.bin"), T + 60, T + 60);
    unlinkSync(join(root, "link"));
    symlinkSync("z.txt", join(root, "link")); // same length as "a.txt"
    rmSync(join(root, "dir/sub"), { recursive: true });
    writeFileSync(join(root, "new-file"), "x");
    for (const d of ["dir"]) utimesSync(join(root, d), T, T);

    const r = compareManifests(expected, await takeManifest(root));
    expect(r.equal).toBe(false);
    expect(r.counts).toEqual({ missing: 2, extra: 1, changed: 4 });
    expect(r.differences).toEqual([
      // The hard link shares a.txt's inode, so its content changed too, but it records only the link.
      { path: "a.txt", kind: "changed", fields: [{ name: "sha256", expected: sha("hello"), actual: sha("HELLO") }] },
      { path: "dir/b.bin", kind: "changed", fields: [{ name: "mtime", expected: T, actual: T + 60 }] },
      { path: "dir/run.sh", kind: "changed", fields: [{ name: "mode", expected: 0o755, actual: 0o644 }] },
      { path: "dir/sub", kind: "missing" },
      { path: "dir/sub/big.bin", kind: "missing" },
      { path: "link", kind: "changed", fields: [{ name: "target", expected: "a.txt", actual: "z.txt" }] },
      { path: "new-file", kind: "extra" },
    ]);
  });

  it("a hard link that became a copy is a change of its link field", async () => {
    const expected = await takeManifest(fresh());
    const root = fresh();
    unlinkSync(join(root, "hard"));
    writeFileSync(join(root, "hard"), "hello");
    chmodSync(join(root, "hard"), 0o644);
    utimesSync(join(root, "hard"), T, T);
    const r = compareManifests(expected, await takeManifest(root));
    expect(r.counts).toEqual({ missing: 0, extra: 0, changed: 1 });
    expect(r.differences[0]).toMatchObject({ path: "hard", kind: "changed" });
    expect(r.differences[0]!.fields!.map((f) => f.name)).toEqual(["sha256", "link"]);
  });

  it("lists at most `limit` differences but counts them all", async () => {
    const expected = await takeManifest(fresh());
    const root = fresh();
    for (let i = 0; i < 30; i++) writeFileSync(join(root, `extra-${String(i).padStart(2, "0")}`), "");
    rmSync(join(root, "empty"), { recursive: true });
    const actual = await takeManifest(root);

    const limited = compareManifests(expected, actual, 5);
    expect(limited.equal).toBe(false);
    expect(limited.counts).toEqual({ missing: 1, extra: 30, changed: 0 });
    expect(limited.differences).toHaveLength(5);
    const paths = limited.differences.map((d) => d.path);
    expect(paths).toEqual([...paths].sort());

    expect(compareManifests(expected, actual).differences).toHaveLength(20); // the default limit
    expect(compareManifests(expected, actual, 1000).differences).toHaveLength(31);
  });
});
