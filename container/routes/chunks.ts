// Routes for content-addressed chunks (chunks.ts) and lazy mounts (lazy-mount.ts): index a staged image, upload the
// chunks the store lacks, mount an image before it is downloaded, and wait for it to become complete. Every URL a
// request names must be on the store's origin, checked field by field, as for the other presigned routes.
import { stat } from "node:fs/promises";
import type { z } from "zod";
import { AgentError } from "../http/agent-error.ts";
import { indexImage, uploadChunks } from "../mounts/chunks.ts";
import { addLazyUrls, lazyFiles, mountLazy, remountLazyImage, waitLazy } from "../mounts/lazy-mount.ts";
import * as P from "../contract/protocol.ts";
import { checkSandboxPath } from "../system/path-confinement.ts";
import { clearPaths } from "./images.ts";
import type { Ctx, Routes } from "./route.ts";

async function existingFile(c: Ctx, value: string, field: string): Promise<string> {
  const file = await c.path(value, field);
  if (!(await stat(file).catch(() => null))?.isFile()) throw new AgentError("not_found", `${field}: no file there`, field);
  return file;
}

function checkUrls(c: Ctx, urls: Record<string, string>): void {
  for (const [digest, url] of Object.entries(urls)) c.storeUrl(url, `urls.${digest}`);
}

export const chunkRoutes: Routes = {
  "POST /v1/chunks/index": async (c) => {
    const body = await c.json(P.ChunkIndexBody);
    return indexImage(await existingFile(c, body.image, "image"), await c.path(body.output, "output"), body.avg);
  },

  "POST /v1/chunks/upload": async (c) => {
    const body = await c.json(P.ChunkUploadBody);
    checkUrls(c, body.urls);
    return uploadChunks(await existingFile(c, body.image, "image"), await existingFile(c, body.index, "index"), body.urls, body);
  },

  "POST /v1/lazy/mount": async (c) => {
    const body = await c.json(P.LazyMountBody);
    checkUrls(c, body.urls);
    if (body.clear) await clearPaths(c, body.clear, "clear.");
    return mountLazy(c.agent.mounts, c.sandboxId, {
      index: await existingFile(c, body.index, "index"), indexPath: checkSandboxPath(body.index, "index"),
      work: await c.path(body.work, "work"), workPath: checkSandboxPath(body.work, "work"),
      cache: await c.path(body.cache, "cache"),
      ...(body.path !== undefined ? { dir: await c.path(body.path, "path"), path: checkSandboxPath(body.path, "path") } : {}),
      urls: body.urls, moreUrls: body.moreUrls, format: body.format, prefetch: body.prefetch,
    });
  },

  "POST /v1/lazy/urls": async (c) => {
    const body = await c.json(P.LazyUrlsBody);
    checkUrls(c, body.urls);
    return addLazyUrls(await c.path(body.work, "work"), body.urls, body.last);
  },

  "POST /v1/lazy/remount": async (c) => remountLazy(c, await c.json(P.LazyRemountBody)),

  "POST /v1/lazy/wait": async (c) => {
    const body = await c.json(P.LazyWaitBody);
    return waitLazy(lazyFiles(await c.path(body.work, "work")).status, body.timeoutMs);
  },
};

/** POST /v1/lazy/remount's work, also done by a swap that mounts the image at its target (routes/swaps.ts). */
export async function remountLazy(c: Ctx, body: z.infer<typeof P.LazyRemountBody>) {
  return remountLazyImage(c.agent.mounts, c.sandboxId, {
    work: await c.path(body.work, "work"), workPath: checkSandboxPath(body.work, "work"),
    dir: await c.path(body.path, "path"), path: checkSandboxPath(body.path, "path"), format: body.format,
  });
}
