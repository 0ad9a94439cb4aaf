// takeOverlayLayer (container/mounts/overlay-layer.ts) on real trees standing in for an overlay's three directories
// (test/fixtures/fork-trees.ts): the base as the lower, the fork as the merged view, and the upper directory the
// overlay would hold, whiteouts included. From the upper alone (and the lower where the layer takes something
// away) it must find the whiteouts and the opaque directory, hash what changed, and count the tree's totals, hard
// links included; the base's manifest with its layer applied must be the fork's. Whiteouts need root (mknod).
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createHash } from "node:crypto";
import { afterAll, beforeAll, expect, it } from "vitest";
import { applyLayer } from "../../container/manifest/manifest-layer.ts";
import { takeOverlayLayer } from "../../container/mounts/overlay-layer.ts";
import { LayerManifestSchema } from "../../container/contract/protocol.ts";
import { buildForkTrees, buildUpper, type ForkTrees } from "../fixtures/fork-trees.ts";

const root = process.getuid?.() === 0;
let dir: string;
let t: ForkTrees;
let upper: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "snapflow-overlay-layer-"));
  t = await buildForkTrees(dir);
  upper = join(dir, "upper");
  if (root) buildUpper(t, upper);
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

const request = () => ({ merged: t.fork, upper, lower: t.base, base: "bk-base", baseTotals: t.baseManifest.totals, manifestOut: join(dir, "out", "layer.json") });

it.runIf(root)("finds the upper's whiteouts and opaque directory, and the tree's totals; applied to the base it is the fork", async () => {
  const r = request();
  const result = await takeOverlayLayer(r);
  const text = readFileSync(r.manifestOut);
  expect(result.manifest.sha256).toBe(createHash("sha256").update(text).digest("hex"));
  const layer = LayerManifestSchema.parse(JSON.parse(text.toString()));
  expect(layer.removed.sort()).toEqual(["deleted.txt", "gone"]);
  expect(layer.opaque).toEqual(["remade"]);
  expect(layer.entries).toEqual(t.layer.entries);
  expect(layer.totals).toEqual(t.forkManifest.totals);
  expect(applyLayer(t.baseManifest, layer)).toEqual(t.forkManifest);
});

it.runIf(root)("refuses a merged listing that is neither the layers' union nor the upper's own (a redirected directory)", async () => {
  // The merged view shows "keep" with an entry neither layer has there: not something the upper alone explains.
  const r = { ...request(), merged: t.base, manifestOut: join(dir, "out", "refused.json") };
  await expect(takeOverlayLayer(r)).rejects.toThrow(/neither its layers' union nor its upper's own entries/);
});
