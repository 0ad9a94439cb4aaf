// The lazy restore from a file-level index (mounts/filecas-mount.ts): POST /v1/files/mount serves the index's tree
// read-only at a confined mountpoint. Every pack URL (and the index's, when the helper fetches it) must be on the
// store's origin, checked one by one.
import { stat } from "node:fs/promises";
import { AgentError } from "../http/agent-error.ts";
import { SANDBOX_DIRS, lazyWorkPath } from "../contract/sandbox-layout.ts";
import { filesWorkName, mountFiles } from "../mounts/filecas-mount.ts";
import * as P from "../contract/protocol.ts";
import { checkSandboxPath } from "../system/path-confinement.ts";
import { checkedChain } from "./index-chain.ts";
import { clearPaths } from "./images.ts";
import type { Routes } from "./route.ts";

export const filecasMountRoutes: Routes = {
  "POST /v1/files/mount": async (c) => {
    const body = await c.json(P.FilesMountBody);
    if (!Object.keys(body.urls).length) throw new AgentError("bad_request", "urls: a URL for each pack the index names", "urls");
    for (const [pack, url] of Object.entries(body.urls)) c.storeUrl(url, `urls.${pack}`);
    const index = await c.path(body.index.file, "index.file");
    const indexUrl = body.index.url === undefined ? undefined : c.storeUrl(body.index.url, "index.url");
    if (!indexUrl && !(await stat(index).catch(() => null))?.isFile()) throw new AgentError("not_found", "index.file: no file there", "index.file");
    if (body.clear) await clearPaths(c, body.clear, "clear.");
    const workPath = body.work ?? lazyWorkPath(filesWorkName());
    const cachePath = body.cache ?? SANDBOX_DIRS.chunkCache;
    return mountFiles(c.agent.mounts, c.sandboxId, {
      index, indexPath: checkSandboxPath(body.index.file, "index.file"), sha256: body.index.sha256, ...(indexUrl ? { indexUrl } : {}), ...checkedChain(c, body.index.chain, "index"),
      dir: await c.path(body.mountpoint, "mountpoint"), path: checkSandboxPath(body.mountpoint, "mountpoint"),
      work: await c.path(workPath, "work"), workPath, cache: await c.path(cachePath, "cache"), urls: body.urls, prefetch: body.prefetch,
    });
  },
};
