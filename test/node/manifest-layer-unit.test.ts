// Layer manifests (container/manifest/manifest-layer.ts, version 2) on real trees (test/fixtures/fork-trees.ts): the base's
// manifest with the layer applied must be the fork's own manifest, entry for entry and in walk order. And
// loadManifest (container/manifest/manifest-file.ts) still reads version 1, and refuses a layer without its base.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadManifest, writeManifest } from "../../container/manifest/manifest-file.ts";
import { applyLayer, applyLayerStream, walkOrder } from "../../container/manifest/manifest-layer.ts";
import type { ManifestEntry } from "../../container/contract/protocol.ts";
import { deltaLayer } from "../../container/archive/delta.ts";
import { buildForkTrees, type ForkTrees } from "../fixtures/fork-trees.ts";

let dir: string;
let t: ForkTrees;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "snapflow-layer-"));
  t = await buildForkTrees(dir);
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("deltaLayer (a tar delta's stored manifest)", () => {
  it("holds only what differs from the base, and applied to the base gives the delta's whole manifest back", () => {
    const base = new Map(t.baseManifest.entries.map((e) => [e.path, e]));
    const kept = new Set(t.forkManifest.entries.map((e) => e.path));
    const deleted = t.baseManifest.entries.map((e) => e.path).filter((p) => !kept.has(p));
    const layer = deltaLayer(t.forkManifest, base, deleted, "bk-20260101000000-00000000");
    expect(layer.entries.length).toBeLessThan(t.forkManifest.entries.length);
    expect(layer.entries.every((e) => JSON.stringify(base.get(e.path)) !== JSON.stringify(e))).toBe(true);
    const back = applyLayer(t.baseManifest, layer);
    expect(back.entries).toEqual(t.forkManifest.entries);
    expect(back.totals).toEqual(t.forkManifest.totals);
  });
});

describe("applyLayer", () => {
  it("gives the fork's manifest: replaced, removed, hidden and added entries, in walk order", () => {
    const merged = applyLayer(t.baseManifest, t.layer);
    expect(merged.entries).toEqual(t.forkManifest.entries);
    expect(merged.totals).toEqual(t.forkManifest.totals);
  });

  it("regroups hard links whose first name the layer replaced", () => {
    const merged = applyLayer(t.baseManifest, t.layer);
    const at = (p: string) => merged.entries.find((e) => e.path === p)!;
    expect(at("h2").link).toBeUndefined();
    expect(at("h2").sha256).toBe(t.baseManifest.entries.find((e) => e.path === "h1")!.sha256);
    expect(at("t2").link).toBeUndefined();
    expect(at("t3").link).toBe("t2");
  });

  it("over a streamed base (a restore's reading) gives the same entries, hard links regrouped", async () => {
    const streamed: ManifestEntry[] = [];
    const base = t.baseManifest.entries;
    const batches = (async function* () { for (let i = 0; i < base.length; i += 3) yield base.slice(i, i + 3); })();
    for await (const batch of applyLayerStream(batches, t.layer)) streamed.push(...batch);
    expect(streamed).toEqual(t.forkManifest.entries);
  });

  it("an empty layer is the base", () => {
    expect(applyLayer(t.baseManifest, { ...t.layer, entries: [], removed: [], opaque: [] }).entries).toEqual(t.baseManifest.entries);
  });

  it("orders as the walk does: a directory before what it holds, names in sort order", () => {
    const paths = ["b", "a/z", "a", "a.b", "a/b/c", "A"];
    expect([...paths].sort(walkOrder)).toEqual(["A", "a", "a/b/c", "a/z", "a.b", "b"]);
  });
});

describe("loadManifest", () => {
  it("reads a version 1 manifest as it always has", async () => {
    const file = join(dir, "v1.json");
    await writeManifest(file, t.baseManifest);
    expect(await loadManifest({ file }, "expected")).toEqual(t.baseManifest);
  });

  it("refuses a layer that comes without its base's manifest", async () => {
    const file = join(dir, "layer.json");
    writeFileSync(file, JSON.stringify(t.layer));
    await expect(loadManifest({ file }, "expected")).rejects.toThrow(/layer manifest \(over snapshot bk-base\) needs its base's manifest/);
  });
});
