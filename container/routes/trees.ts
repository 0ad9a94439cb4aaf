// Routes over whole directory trees: generate a dataset, take a manifest (path, type, mode, size, mtime, hash of
// every entry), verify a tree against an expected manifest, plan a changed-files delta against a base manifest or
// an overlay delta from its upper directory, and remove the entries a delta says are gone. Only JSON flows through
// here; the trees stay in the sandbox.
import { rm } from "node:fs/promises";
import { generateDataset } from "../system/dataset.ts";
import { planDelta } from "../archive/delta.ts";
import { takeOverlayLayer } from "../mounts/overlay-layer.ts";
import { refuseIfMounted } from "../mounts/mount-guard.ts";
import { removeEntriesSafely } from "../extract/safe-remove.ts";
import { compareManifests, takeManifest, type Manifest } from "../manifest/manifest.ts";
import * as P from "../contract/protocol.ts";
import { checkTree } from "../manifest/tree-verify.ts";
import { AgentError } from "../http/agent-error.ts";
import { requestedManifestReader } from "./archive.ts";
import { compileSelection } from "../archive/selection.ts";
import { ceilingOf, requestedSelection } from "./selection-request.ts";
import { existingDir, type Routes } from "./route.ts";

export const treeRoutes: Routes = {
  "POST /v1/datasets": async (c) => {
    const body = await c.json(P.DatasetBody);
    const dir = await c.path(body.path, "path");
    if (body.replace) {
      await refuseIfMounted(dir, "path", c.root.hostRoot, c.agent.mounts, c.sandboxId);
      await rm(dir, { recursive: true, force: true });
    }
    return generateDataset(dir, body);
  },

  "POST /v1/manifest": async (c) => {
    const body = await c.json(P.PathBody);
    const dir = await existingDir(await c.path(body.path, "path"), "path");
    const selection = await requestedSelection(c, dir);
    const manifest = await takeManifest(dir, { exclude: selection?.exclude });
    return selection ? { ...manifest, selection: selection.record() } : manifest;
  },

  "POST /v1/selection": async (c) => {
    const body = await c.json(P.SelectionBody);
    const dir = await existingDir(await c.path(body.path, "path"), "path");
    return (await compileSelection(dir, body.selection, { ceiling: ceilingOf(c) }))?.record() ?? { ...body.selection, excluded: {}, warnings: [] };
  },

  "POST /v1/verify": async (c) => {
    const body = await c.json(P.VerifyBody);
    const started = performance.now();
    const actual = await takeManifest(await existingDir(await c.path(body.path, "path"), "path"));
    const comparison = compareManifests(body.expected as Manifest, actual, body.limit);
    return { ...comparison, totals: actual.totals, ms: Math.round(performance.now() - started) };
  },

  "POST /v1/delta": async (c) => {
    const body = await c.json(P.DeltaBody);
    const dir = await existingDir(await c.path(body.path, "path"), "path");
    const selection = await requestedSelection(c, dir);
    const plan = await planDelta(dir, body.base as Manifest, await c.path(body.list, "list"), { rehash: body.rehash, exclude: selection?.exclude });
    return selection ? { ...plan, manifest: { ...plan.manifest, selection: selection.record() } } : plan;
  },

  "POST /v1/overlay-layer": async (c) => {
    const body = await c.json(P.OverlayLayerBody);
    const [merged, upper, lower] = await Promise.all((["path", "upper", "lower"] as const).map(async (f) => existingDir(await c.path(body[f], f), f)));
    return takeOverlayLayer({ merged: merged!, upper: upper!, lower: lower!, base: body.base, baseTotals: body.baseTotals, manifestOut: await c.path(body.manifestOut, "manifestOut") });
  },

  "POST /v1/verify-tree": async (c) => {
    const body = await c.json(P.VerifyTreeBody);
    const dir = await existingDir(await c.path(body.path, "path"), "path");
    const expected = (await requestedManifestReader(c, body.expected, "expected"))!;
    if (body.hashes && !body.deep) throw new AgentError("bad_request", "hashes: only with deep (they stand in for reading every file)", "hashes");
    if (!body.walk && !body.hashes) throw new AgentError("bad_request", "walk: false needs hashes (the pass's manifest of this tree, compared instead of a walk)", "walk");
    const hashes = await requestedManifestReader(c, body.hashes, "hashes");
    // Restores carry setuid/setgid bits and owners over only when asked (checkTree's keepOwnership).
    return checkTree(dir, expected, { deep: body.deep, hashes, fromHashes: !body.walk, limit: body.limit, ignoreSetid: true, keepOwnership: body.keepOwnership, sparse: body.sparse });
  },

  "POST /v1/remove": async (c) => {
    const body = await c.json(P.RemoveBody);
    const dir = await existingDir(await c.path(body.path, "path"), "path");
    // A restore target holds no mount (it was emptied first); one appearing there means a listed entry could
    // reach into it (rm -r empties a writable overlay) or pull the floor from under it: refused, as DELETE /v1/files.
    await refuseIfMounted(dir, "path", c.root.hostRoot, c.agent.mounts, c.sandboxId);
    // By directory descriptors: never a delete through a symlink, not even one swapped in meanwhile (safe-remove.ts).
    return removeEntriesSafely(dir, body.entries);
  },
};
