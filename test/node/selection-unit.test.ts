// Selection (container/archive/selection.ts) on real temporary trees with the real git: glob patterns, git's ignore rules
// inside a work tree and outside one, CACHEDIR.TAG directories, and the warning when git is missing.
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SelectionSpec } from "../../container/contract/protocol.ts";
import { CACHEDIR_SIGNATURE, compileSelection, globToRegExp, requestedSelectionSpec } from "../../container/archive/selection.ts";
import { walkAll } from "../../container/manifest/tree-walk.ts";

describe("globToRegExp", () => {
  const m = (pattern: string, path: string, isDir = false) => {
    const g = globToRegExp(pattern);
    return (!g.dirOnly || isDir) && g.re.test(path);
  };
  it.each([
    ["*.log", "a.log", true], ["*.log", "deep/er/a.log", true], ["*.log", "a.log.txt", false],
    ["node_modules/", "x/node_modules", true, true], ["node_modules/", "x/node_modules", false, false],
    ["build/out", "build/out", true], ["build/out", "src/build/out", false], ["/dist", "dist", true], ["/dist", "a/dist", false],
    ["**/tmp", "tmp", true], ["**/tmp", "a/b/tmp", true], ["a/**/z", "a/z", true], ["a/**/z", "a/b/c/z", true],
    ["docs/**", "docs/x/y", true], ["docs/**", "docs", false], ["f?o", "foo", true], ["f?o", "f/o", false],
    ["[ab].txt", "b.txt", true], ["[!ab].txt", "b.txt", false], ["[!ab].txt", "c.txt", true],
    ["café*", "unicode/café-naïve.txt", true], ["a.b", "axb", false],
  ])("%j on %j → %s", (pattern, path, expected, isDir = false) => {
    expect(m(pattern, path, isDir)).toBe(expected);
  });
});

describe("compileSelection on a real tree", () => {
  let base: string;
  const tree = (root: string) => {
    mkdirSync(join(root, "src/cache/blobs"), { recursive: true });
    mkdirSync(join(root, "logs"), { recursive: true });
    mkdirSync(join(root, "fake-cache"), { recursive: true });
    writeFileSync(join(root, ".gitignore"), "*.tmp\nlogs/\n");
    writeFileSync(join(root, "src/a.ts"), "a");
    writeFileSync(join(root, "src/b.tmp"), "b");
    writeFileSync(join(root, "logs/x.log"), "x");
    writeFileSync(join(root, "src/cache/CACHEDIR.TAG"), `${CACHEDIR_SIGNATURE}\n# a cache\n`);
    writeFileSync(join(root, "src/cache/blobs/1"), "1");
    writeFileSync(join(root, "fake-cache/CACHEDIR.TAG"), "not the signature");
  };
  beforeAll(() => {
    base = mkdtempSync(join(tmpdir(), "snapflow-selection-"));
    tree(join(base, "plain"));
    tree(join(base, "repo"));
    execFileSync("git", ["init", "-q", join(base, "repo")]);
    execFileSync("git", ["-C", join(base, "repo"), "add", "-f", "src/b.tmp"]); // tracked: git keeps it
  });
  afterAll(() => rmSync(base, { recursive: true, force: true }));

  const selected = async (root: string, spec: unknown, git?: string | null) => {
    const sel = await compileSelection(root, SelectionSpec.parse(spec), git === undefined ? {} : { git });
    const paths = (await walkAll(root, { exclude: sel?.exclude })).map((e) => e.path);
    return { paths, record: sel?.record() };
  };

  it("selects everything without rules", async () => {
    expect(await compileSelection(join(base, "plain"), SelectionSpec.parse({}))).toBeUndefined();
  });

  it("excludes by glob, prunes excluded directories and counts each rule", async () => {
    const { paths, record } = await selected(join(base, "plain"), { excludes: ["*.tmp", "logs/"] });
    expect(paths).toEqual([".gitignore", "fake-cache", "fake-cache/CACHEDIR.TAG", "src", "src/a.ts", "src/cache", "src/cache/CACHEDIR.TAG", "src/cache/blobs", "src/cache/blobs/1"]);
    expect(record).toMatchObject({ excluded: { "exclude *.tmp": 1, "exclude logs/": 1 }, warnings: [] });
  });

  it("gitignore outside a work tree: git's rules over the tree's .gitignore files", async () => {
    const { paths, record } = await selected(join(base, "plain"), { gitignore: true });
    expect(paths).not.toContain("src/b.tmp");
    expect(paths.filter((p) => p.startsWith("logs"))).toEqual([]);
    expect(record!.excluded).toEqual({ gitignore: 2 });
  });

  it("gitignore inside a work tree: a tracked file stays even when a rule matches it", async () => {
    const { paths } = await selected(join(base, "repo"), { gitignore: true });
    expect(paths).toContain("src/b.tmp");
    expect(paths).toContain(".git");
    expect(paths).not.toContain("logs");
  });

  it("excludeCaches: a directory with a valid CACHEDIR.TAG goes whole; a wrong signature does not count", async () => {
    const { paths, record } = await selected(join(base, "plain"), { excludeCaches: true });
    expect(paths.filter((p) => p.startsWith("src/cache"))).toEqual([]);
    expect(paths).toContain("fake-cache/CACHEDIR.TAG");
    expect(record!.excluded).toEqual({ "CACHEDIR.TAG": 1 });
  });

  it("without git: nothing excluded by gitignore, and a warning saying so", async () => {
    const { paths, record } = await selected(join(base, "plain"), { gitignore: true }, null);
    expect(paths).toContain("src/b.tmp");
    expect(record!.warnings[0]).toMatch(/git is not installed/);
  });
});

describe("requestedSelectionSpec", () => {
  it("reads the header, and refuses bad patterns naming the field", () => {
    expect(requestedSelectionSpec(encodeURIComponent(JSON.stringify({ excludes: ["*.log"] })))).toEqual({ excludes: ["*.log"], gitignore: false, excludeCaches: false });
    expect(requestedSelectionSpec(undefined)).toBeUndefined();
    expect(() => requestedSelectionSpec(encodeURIComponent(JSON.stringify({ excludes: ["!keep"] })))).toThrow(/selection.excludes.0: negated/);
    expect(() => requestedSelectionSpec(encodeURIComponent(JSON.stringify({ excludes: ["../x"] })))).toThrow(/'\.\.'/);
    expect(() => requestedSelectionSpec("%7Bnope")).toThrow(/not URI-encoded JSON/);
  });
});

describe("image builders get the excluded paths as argv", () => {
  it("mksquashfs: -e last, names as they are; mkfs.erofs: --exclude-path each", async () => {
    const { mksquashfsArgv, mkfsErofsArgv } = await import("../../container/images/image-argv.ts");
    const sq = mksquashfsArgv("/d", "/o", { kind: "squashfs", compression: "zstd" }, 2, [" lead", "a/b c"]);
    expect(sq.slice(-3)).toEqual(["-e", " lead", "a/b c"]);
    expect(mksquashfsArgv("/d", "/o", { kind: "squashfs", compression: "zstd" }, 2)).not.toContain("-e");
    const er = mkfsErofsArgv("/d", "/o", { kind: "erofs", compression: "lz4" }, ["x y", "z"]);
    expect(er.slice(-4)).toEqual(["--exclude-path=x y", "--exclude-path=z", "/o", "/d"]);
  });
});
