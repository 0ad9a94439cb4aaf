// Layer manifests (container/manifest-layer.ts, version 2) on real trees: a base tree and a fork of it changed as
// an overlay changes one (a copied-up file is a new inode, a deleted entry is gone with all below it, a directory
// made again hides the old one's contents), the layer holding what the fork's upper directory would. The base's
// manifest with the layer applied must be the fork's own manifest, entry for entry and in walk order. And
// loadManifest (container/manifest-file.ts) still reads version 1, and refuses a layer without its base.
import { execFileSync } from "node:child_process";
import { chmodSync, linkSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, unlinkSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { takeManifest, type Manifest } from "../../container/manifest.ts";
import { loadManifest, writeManifest } from "../../container/manifest-file.ts";
import { applyLayer, walkOrder } from "../../container/manifest-layer.ts";
import type { LayerManifest } from "../../container/protocol.ts";
import { walkAll } from "../../container/tree-walk.ts";

const T = 1_700_000_000;
let dir: string;
let base: Manifest;
let fork: Manifest;
let layer: LayerManifest;

/** Every directory's mtime back to T, deepest first: only the entries an upper directory would hold may differ. */
async function settle(root: string) {
  const dirs = (await walkAll(root)).filter((e) => e.type === "dir").map((e) => e.path).reverse();
  for (const d of [...dirs, ""]) utimesSync(join(root, d), T, T);
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "snapflow-layer-"));
  const b = join(dir, "base");
  mkdirSync(join(b, "keep/deep"), { recursive: true });
  mkdirSync(join(b, "gone/inner"), { recursive: true });
  mkdirSync(join(b, "remade/old"), { recursive: true });
  mkdirSync(join(b, "was-dir/x"), { recursive: true });
  writeFileSync(join(b, "keep/deep/a.txt"), "a");
  writeFileSync(join(b, "keep/edited.txt"), "before");
  writeFileSync(join(b, "gone/inner/f"), "f");
  writeFileSync(join(b, "gone/g"), "g");
  writeFileSync(join(b, "remade/old/o"), "o");
  writeFileSync(join(b, "remade/r"), "r");
  writeFileSync(join(b, "was-dir/x/y"), "y");
  writeFileSync(join(b, "was-file"), "file");
  writeFileSync(join(b, "deleted.txt"), "d");
  // Two hard-link groups: one loses its first name to a copy-up, the other its first of three names.
  writeFileSync(join(b, "h1"), "pair");
  linkSync(join(b, "h1"), join(b, "h2"));
  writeFileSync(join(b, "t1"), "trio");
  linkSync(join(b, "t1"), join(b, "t2"));
  linkSync(join(b, "t1"), join(b, "t3"));
  symlinkSync("keep/deep/a.txt", join(b, "link"));
  chmodSync(join(b, "keep/edited.txt"), 0o600);
  await settle(b);
  base = await takeManifest(b);

  // The fork, changed as through an overlay; `upper` is what its upper directory would then hold.
  const f = join(dir, "fork");
  // cp -a keeps hard links (cpSync copies each name apart) and times.
  execFileSync("cp", ["-a", b, f]);
  const replace = (rel: string, content: string) => {
    unlinkSync(join(f, rel));
    writeFileSync(join(f, rel), content);
  };
  replace("keep/edited.txt", "after, longer");
  replace("h1", "pair, copied up");
  replace("t1", "trio, copied up");
  rmSync(join(f, "gone"), { recursive: true });
  rmSync(join(f, "deleted.txt"));
  rmSync(join(f, "remade"), { recursive: true });
  mkdirSync(join(f, "remade/new"), { recursive: true });
  writeFileSync(join(f, "remade/new/n"), "n");
  rmSync(join(f, "was-dir"), { recursive: true });
  writeFileSync(join(f, "was-dir"), "now a file");
  rmSync(join(f, "was-file"));
  mkdirSync(join(f, "was-file"));
  writeFileSync(join(f, "was-file/inside"), "i");
  mkdirSync(join(f, "added/sub"), { recursive: true });
  writeFileSync(join(f, "added/sub/new.txt"), "new");
  await settle(f);
  fork = await takeManifest(f);

  const upper = new Set(["keep", "keep/edited.txt", "h1", "t1", "remade", "remade/new", "remade/new/n", "was-dir", "was-file", "was-file/inside", "added", "added/sub", "added/sub/new.txt"]);
  layer = {
    version: 2, base: "bk-base",
    entries: fork.entries.filter((e) => upper.has(e.path)),
    removed: ["gone", "deleted.txt"], opaque: ["remade"], totals: fork.totals,
  };
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("applyLayer", () => {
  it("gives the fork's manifest: replaced, removed, hidden and added entries, in walk order", () => {
    const merged = applyLayer(base, layer);
    expect(merged.entries).toEqual(fork.entries);
    expect(merged.totals).toEqual(fork.totals);
  });

  it("regroups hard links whose first name the layer replaced", () => {
    const merged = applyLayer(base, layer);
    const at = (p: string) => merged.entries.find((e) => e.path === p)!;
    expect(at("h2").link).toBeUndefined();
    expect(at("h2").sha256).toBe(base.entries.find((e) => e.path === "h1")!.sha256);
    expect(at("t2").link).toBeUndefined();
    expect(at("t3").link).toBe("t2");
  });

  it("an empty layer is the base", () => {
    expect(applyLayer(base, { ...layer, entries: [], removed: [], opaque: [] }).entries).toEqual(base.entries);
  });

  it("orders as the walk does: a directory before what it holds, names in sort order", () => {
    const paths = ["b", "a/z", "a", "a.b", "a/b/c", "A"];
    expect([...paths].sort(walkOrder)).toEqual(["A", "a", "a/b/c", "a/z", "a.b", "b"]);
  });
});

describe("loadManifest", () => {
  it("reads a version 1 manifest as it always has", async () => {
    const file = join(dir, "v1.json");
    await writeManifest(file, base);
    expect(await loadManifest({ file }, "expected")).toEqual(base);
  });

  it("refuses a layer that comes without its base's manifest", async () => {
    const file = join(dir, "layer.json");
    writeFileSync(file, JSON.stringify(layer));
    await expect(loadManifest({ file }, "expected")).rejects.toThrow(/layer manifest \(over snapshot bk-base\) needs its base's manifest/);
  });
});
