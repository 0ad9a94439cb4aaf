// Filesystem images, mounts and overlays.
// Part of the agent's protocol (../protocol.ts re-exports every part): both sides import it.
import { z } from "zod";
import { ImageFormat } from "./formats.ts";
import { MAX_OVERLAY_CHAIN, Ownership, StoredManifest } from "./trees.ts";

// ---- Filesystem images, mounts and overlays (images.ts, mounts.ts, image-argv.ts) ----
//   POST   /v1/image        ImageBody        an image of the tree at `path` written to `output` → WrittenBytes;
//                                             with manifestOut → SinglePassResult & {onePass} (image-with-manifest.ts)
//   POST   /v1/materialize  MaterializeBody  an image file → a directory: extracted, or mounted read-only
//                                            (kernel, or FUSE) → {ms, bytes, mounted?}
//   POST   /v1/overlay      OverlayBody      a writable overlay over `lower` mounted at `path` → {upper, work, ms, mounted}
//   POST   /v1/overlay/stack OverlayStackBody  a read-only overlay of several lowers (a delta chain) → {ms, mounted}
//   GET    /v1/mounts                        the sandbox's mounts made through the agent → {mounts: MountEntry[]}
//   DELETE /v1/mounts?path=                  unmount (overlays on top of it first) → {unmounted: paths}
//   POST   /v1/clear        ClearBody        unmount what is mounted at each of `unmount` (nothing there is fine),
//                                            then delete each of `remove`: a retry's way cleared in one call
//                                            → {unmounted: paths, removed: number, ms}
// A mount needs an empty or missing `path`. DELETE /v1/sandbox unmounts the sandbox's mounts before deleting.

export const ImageBody = z.object({
  path: z.string(),
  output: z.string(),
  format: ImageFormat,
  /** the manifest goes here, made in the same read as the image where the format allows (answers SinglePassResult & {onePass}) */
  manifestOut: z.string().optional(),
});
export const MaterializeHow = z.enum(["extract", "mount-kernel", "mount-fuse"]);
export const MaterializeBody = z.object({ archive: z.string(), path: z.string(), format: ImageFormat, how: MaterializeHow, ...Ownership });
export const OverlayBody = z.object({
  lower: z.string(),
  path: z.string(),
  how: z.enum(["kernel", "fuse"]),
  /** an upper directory that already holds a layer (a restored overlay delta), kept as it is; its work dir is
   *  `${upper}.work`. Without it the overlay gets a fresh, empty layer under /snapflow/overlays/. */
  upper: z.string().optional(),
  /** the lower must be a mount point (a lazy image): once its mount is gone (an agent restart) the empty directory
   *  left is refused with a 404 naming `lower`, never laid under the overlay */
  lowerMounted: z.boolean().optional(),
});

/**
 * A restored overlay delta's upper directory, and its layer manifest (the snapshot's, over a presigned GET, checked
 * against the record's SHA-256): tar does not carry overlayfs' opaque mark, the manifest lists the directories that had it.
 */

/**
 * POST /v1/overlay/stack: a read-only overlay of several lower directories (`lowers`, topmost first: an overlay
 * delta chain's extracted layers, then its image's mount) mounted at `path`, which a writable overlay then uses as
 * its lower. The kernel reads the layers' whiteouts and opaque marks; nothing is written to them.
 */
export const OverlayStackBody = z.object({ path: z.string(), lowers: z.array(z.string()).min(2).max(MAX_OVERLAY_CHAIN + 1) }).strict();

/** Paths to clear before a mount is made again: unmounted in the order given, then deleted (never through a mount). */
export const ClearBody = z.object({ unmount: z.array(z.string()).max(16).default([]), remove: z.array(z.string()).max(16).default([]) }).strict();

/** A mount made through the agent, as GET /v1/mounts lists it (sandbox paths throughout). */
export interface MountEntry {
  path: string;
  /** lazy: the FUSE file a lazy restore's image is read from (snapflow-lazy), chunks fetched on first read */
  kind: "image" | "overlay" | "lazy";
  /** the image file, the overlay's lower directory, or a lazy mount's index */
  source: string;
  how: "mount-kernel" | "mount-fuse" | "kernel" | "fuse";
  /** the program that mounted it: mount, squashfuse_ll, squashfuse, erofsfuse, fuse-overlayfs, snapflow-lazy */
  tool: string;
  /** as /proc/self/mountinfo has it, e.g. squashfs, fuse.squashfuse_ll, overlay */
  fstype: string;
  /** ISO time of mounting */
  since: string;
  /** listing only: the mount's per-mount options as /proc/self/mountinfo shows them now (every mount has nosuid, nodev) */
  options?: string[];
  /** overlays: the writable layer and overlayfs's work directory */
  upper?: string;
  work?: string;
}

export interface MaterializeResult {
  ms: number;
  /** the image file's size */
  bytes: number;
  mounted?: MountEntry;
  /** erofs extract: names made hard links again after an extractor that copies them (erofs-links.ts) */
  relinked?: number;
}
// ---- end of filesystem images, mounts and overlays ----
