// The file-level backup (issue 24): POST /v1/files/pack runs the engine's files-pack (transfer/engine-files-pack.ts)
// over a tree, its paths confined to the sandbox's roots and every URL it is given checked to be the store's.
import { dirname } from "node:path";
import { AgentError } from "../http/agent-error.ts";
import { pruneKeptIndexes } from "../manifest/manifest-kept.ts";
import { compileSelection, requestedSelectionSpec } from "../archive/selection.ts";
import * as P from "../contract/protocol.ts";
import { filesPack } from "../transfer/engine-files-pack.ts";
import { existingDir, type Routes } from "./route.ts";
import { ceilingOf } from "./selection-request.ts";

export const filecasPackRoutes: Routes = {
  "POST /v1/files/pack": async (c) => {
    const body = await c.json(P.FilesPackBody);
    const dir = await existingDir(await c.path(body.path, "path"), "path");
    body.urls.forEach((u, i) => c.storeUrl(u, `urls.${i}`));
    const base = body.base && {
      ...(body.base.file !== undefined ? { file: await c.path(body.base.file, "base.file") } : {}),
      ...(body.base.url !== undefined ? { url: c.storeUrl(body.base.url, "base.url") } : {}),
      sha256: body.base.sha256,
      ...(body.base.stat !== undefined ? { stat: await c.path(body.base.stat, "base.stat") } : {}),
      ...(body.base.layers ? { layers: await Promise.all(body.base.layers.map((l, i) => c.path(l, `base.layers.${i}`))) } : {}),
      ...(body.base.chain?.length ? {
        chain: await Promise.all(body.base.chain.map(async (o, i) => ({
          ...(o.file !== undefined ? { file: await c.path(o.file, `base.chain.${i}.file`) } : {}),
          ...(o.url !== undefined ? { url: c.storeUrl(o.url, `base.chain.${i}.url`) } : {}),
          sha256: o.sha256,
        }))),
      } : {}),
    };
    const statsOut = body.statsOut !== undefined ? await c.path(body.statsOut, "statsOut") : undefined;
    const spec = body.selection ?? requestedSelectionSpec(c.req.headers[P.SELECTION_HEADER]);
    const compiled = await compileSelection(dir, spec, { ceiling: ceilingOf(c) });
    const selection = compiled?.engineRules();
    if (compiled && !selection) throw new AgentError("bad_request", "selection: a pattern the engine would not read as the agent does (a POSIX class or an escaped letter)", "selection");
    // The client went away: the engine is stopped, and leaves neither the manifest nor the index.
    const ended = new AbortController();
    c.res.once("close", () => ended.abort());
    const indexOut = await c.path(body.indexOut, "indexOut");
    const made = await filesPack({
      dir, ...(body.manifestOut !== undefined ? { manifestOut: await c.path(body.manifestOut, "manifestOut") } : {}), indexOut, name: body.name,
      avgChunk: body.avgChunk, level: body.level, selection, base, urls: body.urls, partSize: body.partSize, concurrency: body.concurrency,
      retries: body.retries, signal: ended.signal, ...(body.layer ? { layer: true } : {}), ...(statsOut ? { statsOut } : {}),
      ...(c.agent.faults.lie(`${c.sandboxId} POST /v1/files/pack`) ? { lie: true } : {}),
    });
    // The index is kept (the next backup's parent): the oldest kept beyond a few go, as kept manifests do.
    await pruneKeptIndexes(dirname(indexOut)).catch(() => {});
    return made;
  },
};
