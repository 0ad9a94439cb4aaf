// Routes for filesystem images and what is mounted from them: build a squashfs/erofs image from a tree,
// materialize an image (check it, then extract it or mount it with the kernel or squashfuse), lay a writable
// overlay over a mounted lower dir (and mark a restored upper's opaque directories; stack a delta chain's layers
// read-only under it), list this sandbox's mounts
// and unmount one. Mounts are recorded in the agent's registry so a sandbox's mounts can be listed and undone in
// order.
import { createHash } from "node:crypto";
import type { z } from "zod";
import { rm } from "node:fs/promises";
import { AgentError } from "../http/agent-error.ts";
import { refuseIfMounted } from "../mounts/mount-guard.ts";
import { checkImage, extractImage, makeImage } from "../images/images.ts";
import { makeImageWithManifest } from "../images/image-with-manifest.ts";
import { extractSafely } from "../extract/safe-extract.ts";
import { listMounts, mountedAt, mountImage, mountOverlay, mountOverlayStack, unmountPath } from "../mounts/mounts.ts";
import * as P from "../contract/protocol.ts";
import { overlayLayer } from "../contract/sandbox-layout.ts";
import { checkSandboxPath } from "../system/path-confinement.ts";
import { excludedTopLevel } from "../archive/selection.ts";
import { existingDir, type Ctx, type Routes } from "./route.ts";
import { requestedSelection } from "./selection-request.ts";

export const imageRoutes: Routes = {
  "POST /v1/image": async (c) => {
    const body = await c.json(P.ImageBody);
    const dir = await existingDir(await c.path(body.path, "path"), "path");
    const selection = await requestedSelection(c, dir);
    const output = await c.path(body.output, "output");
    // With manifestOut: the image and its manifest from one read where the format allows (image-with-manifest.ts).
    if (body.manifestOut !== undefined) return makeImageWithManifest(dir, body.format, output, { manifestOut: await c.path(body.manifestOut, "manifestOut"), ...(selection ? { selection } : {}) });
    const made = await makeImage(dir, body.format, output, selection ? await excludedTopLevel(dir, selection) : []);
    return selection ? { ...made, selection: selection.record() } : made;
  },

  "POST /v1/materialize": async (c): Promise<P.MaterializeResult> => {
    const body = await c.json(P.MaterializeBody);
    const file = await c.path(body.archive, "archive");
    const dir = await c.path(body.path, "path");
    const { bytes } = await checkImage(file, body.format);
    // Through a staging directory, never through a symlink already in the target (safe-extract.ts).
    if (body.how === "extract") return { ...(await extractSafely(dir, undefined, (into) => extractImage(file, body.format, into, { keepOwnership: body.keepOwnership }), { keepOwnership: body.keepOwnership })), bytes };
    const started = performance.now();
    const mounted = await mountImage(c.agent.mounts, c.sandboxId, { file, source: checkSandboxPath(body.archive, "archive"), dir, path: checkSandboxPath(body.path, "path"), format: body.format, how: body.how });
    return { ms: Math.round(performance.now() - started), bytes, mounted };
  },

  "POST /v1/overlay": async (c) => layOverlay(c, await c.json(P.OverlayBody)),

  "POST /v1/overlay/stack": async (c) => {
    const started = performance.now();
    const body = await c.json(P.OverlayStackBody);
    const lowerPaths = body.lowers.map((l, i) => checkSandboxPath(l, `lowers[${i}]`));
    const lowers = await Promise.all(lowerPaths.map((l, i) => c.path(l, `lowers[${i}]`)));
    const path = checkSandboxPath(body.path, "path");
    const mounted = await mountOverlayStack(c.agent.mounts, c.sandboxId, { lowers, lowerPaths, dir: await c.path(path, "path"), path });
    return { ms: Math.round(performance.now() - started), mounted };
  },

  "GET /v1/mounts": async (c) => ({ mounts: await listMounts(c.agent.mounts, c.sandboxId) }),

  "DELETE /v1/mounts": async (c) => {
    const value = c.url.searchParams.get("path");
    const dir = await c.path(value, "path");
    return { unmounted: await unmountPath(c.agent.mounts, c.sandboxId, dir, checkSandboxPath(value, "path")) };
  },

  // A retried step clears what its earlier attempt may have left (mounts, then files) in one round trip rather
  // than one per path: on the first attempt there is nothing to clear, and each call costs the step its latency.
  "POST /v1/clear": async (c) => clearPaths(c, await c.json(P.ClearBody)),
};

/**
 * A whole image file mounted at `path` by a restore's swap (SwapMount "image"): checked as POST /v1/materialize checks
 * it, then mounted. Asked again (a retried swap), the same image already mounted there is the answer, not a second mount.
 */
export async function mountImageAt(c: Ctx, r: { archive: string; path: string; format: P.ImageFormat; how: "mount-kernel" | "mount-fuse" }) {
  const started = performance.now();
  const file = await c.path(r.archive, "archive");
  const dir = await c.path(r.path, "path");
  const source = checkSandboxPath(r.archive, "archive");
  const there = await mountedAt(c.agent.mounts, c.sandboxId, dir, (e) => e.kind === "image" && e.source === source);
  if (there) return { ms: 0, mounted: there };
  await checkImage(file, r.format);
  const mounted = await mountImage(c.agent.mounts, c.sandboxId, { file, source, dir, path: checkSandboxPath(r.path, "path"), format: r.format, how: r.how });
  return { ms: Math.round(performance.now() - started), mounted };
}

/** POST /v1/clear's work, also done first by a mount or swap asked to (`clear`): fields are named under `prefix`. */
export async function clearPaths(c: Ctx, body: z.infer<typeof P.ClearBody>, prefix = "") {
  const started = performance.now();
  const unmounted: string[] = [];
  for (const [i, value] of body.unmount.entries()) {
    const field = `${prefix}unmount[${i}]`;
    const done = await unmountPath(c.agent.mounts, c.sandboxId, await c.path(value, field), checkSandboxPath(value, field)).catch((e: unknown) => {
      if (e instanceof AgentError && e.code === "not_found") return [];
      throw e;
    });
    unmounted.push(...done);
  }
  for (const [i, value] of body.remove.entries()) {
    const field = `${prefix}remove[${i}]`;
    const target = await c.path(value, field);
    await refuseIfMounted(target, field, c.root.hostRoot, c.agent.mounts, c.sandboxId);
    await rm(target, { recursive: true, force: true });
  }
  return { unmounted, removed: body.remove.length, ms: Math.round(performance.now() - started) };
}

/** POST /v1/overlay's work, also done by a swap that lays the overlay at its target (routes/swaps.ts). */
export async function layOverlay(c: Ctx, body: z.infer<typeof P.OverlayBody>) {
  const started = performance.now();
  const path = checkSandboxPath(body.path, "path");
  const layer = overlayLayer(createHash("sha256").update(path).digest("hex").slice(0, 16));
  const [upperPath, workPath] = body.upper ? [checkSandboxPath(body.upper, "upper"), `${checkSandboxPath(body.upper, "upper")}.work`] : [layer.upper, layer.work];
  const mounted = await mountOverlay(c.agent.mounts, c.sandboxId, {
    lower: await c.path(body.lower, "lower"), lowerPath: checkSandboxPath(body.lower, "lower"),
    dir: await c.path(path, "path"), path,
    upper: await c.path(upperPath, "path"), upperPath,
    work: await c.path(workPath, "path"), workPath,
    how: body.how,
    keepUpper: body.upper !== undefined,
    lowerMounted: body.lowerMounted,
  });
  return { upper: upperPath, work: workPath, ms: Math.round(performance.now() - started), mounted };
}
