// Where the Worker asks the agent to put things inside a sandbox: snapflow's own areas under /snapflow, never the
// user's tree. The layout itself is container/contract/sandbox-layout.ts, shared with the agent; this adds the Worker's
// naming (by snapshot or restore id and archive format).
import { extensionOf, type ArchiveFormat } from "../../container/contract/protocol.ts";
import { chainImagePath, chainLayerPath, chainLayersPath, datasetMarkerPath, deltaListPath, imagePath, lazyWorkPath, mountPath, overlayLayer, SANDBOX_DIRS, stagingPath } from "../../container/contract/sandbox-layout.ts";

export const sandboxPaths = {
  /** an archive staged before upload, or downloaded before extraction */
  staged: (id: string, format: ArchiveFormat) => stagingPath(id, extensionOf(format)),
  /** a delta's list of changed entries (NUL-separated, for tar -T) */
  deltaList: deltaListPath,
  /** a single-pass backup's manifest (made from the tar stream) and result, read by the Worker after the archive */
  manifestOut: (id: string) => stagingPath(id, "manifest.json"),
  resultOut: (id: string) => stagingPath(id, "result.json"),
  /** a downloaded image: it backs its mount for as long as the mount lives, so it has its own place */
  image: (id: string, format: ArchiveFormat) => imagePath(id, extensionOf(format)),
  /**
   * overlay-restore: the squashfs base image, its FUSE mount (the overlay's lower) and the overlay's layer; for an
   * overlay delta chain, the image's mount is `chainImage` and the lower is a read-only overlay of it under each
   * delta's layer directory (`chainLayer(1)` the oldest)
   */
  overlay: (restoreId: string) => {
    const { layer, upper } = overlayLayer(restoreId);
    return { image: imagePath(restoreId, "sqsh"), lower: mountPath(restoreId), layer, upper, chainImage: chainImagePath(restoreId), chainLayers: chainLayersPath(restoreId), chainLayer: (i: number) => chainLayerPath(restoreId, i) };
  },
  /**
   * a file-level snapshot's index as the sandbox keeps it after its backup (beside the kept manifests): the next
   * backup's parent, read by the engine when its SHA-256 is the record's
   */
  filesIndex: (id: string) => `${SANDBOX_DIRS.manifests}/${id}.fidx.zst`,
  /** the stat keys of a tree a file-level restore made from snapshot `id` here (the next backup's, with its index) */
  filesStats: (id: string) => `${SANDBOX_DIRS.manifests}/${id}.fidx.stat.zst`,
  /** a chunked backup's index of its staged image, read by the chunk upload */
  chunkIndex: (id: string) => stagingPath(id, "index.json"),
  /** a lazy restore: its mount's directory, the overlay's lower (lazy-overlay) and layer, and the shared chunk cache */
  lazy: (restoreId: string) => ({ work: lazyWorkPath(restoreId), lower: mountPath(restoreId), layer: overlayLayer(restoreId).layer, cache: SANDBOX_DIRS.chunkCache }),
  /** the marker recording which dataset spec a benchmark source holds */
  datasetMarker: datasetMarkerPath,
} as const;
