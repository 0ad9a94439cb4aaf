// Archive and image formats, and the file extension each is stored under.
// Part of the agent's protocol (../protocol.ts re-exports every part): both sides import it.
import { z } from "zod";

export const Compression = z.enum(["none", "zstd", "gzip", "pigz", "lz4"]);
export type Compression = z.infer<typeof Compression>;

export const TarFormat = z.object({
  kind: z.literal("tar"),
  compression: Compression,
  level: z.coerce.number().int().min(-7).max(22).optional(),
  threads: z.coerce.number().int().min(0).max(256).optional(),
  long: z.preprocess((v) => (v === "true" ? true : v === "false" ? false : v), z.boolean()).optional(),
});
export type TarFormat = z.infer<typeof TarFormat>;

/**
 * Filesystem images: made to a file (mksquashfs / mkfs.erofs cannot write to a pipe), restored by extracting
 * (unsquashfs, fsck.erofs --extract) or by mounting (kernel, or squashfuse without CAP_SYS_ADMIN).
 */
export const SquashfsFormat = z.object({
  kind: z.literal("squashfs"),
  compression: z.enum(["zstd", "lz4", "lzo", "gzip", "xz"]),
  /** zstd 1–22, gzip 1–9; mksquashfs's default when absent (zstd 15, slow: the seeds' 21.6 s) */
  level: z.number().int().min(1).max(22).optional(),
  /** bytes, a power of two from 4 KiB to 1 MiB; mksquashfs's default 128 KiB when absent */
  blockSize: z.number().int().min(4096).max(1 << 20).refine((n) => (n & (n - 1)) === 0, "a power of two").optional(),
  /**
   * Content-addressed chunks (chunk-index.ts): the image is cut by FastCDC (min avg/4, max 4·avg) into chunks stored
   * as chunks/<sha256>, shared by every snapshot that has them, and the snapshot's archive is their index. The
   * chunking parameters are part of the format: other values cut other chunks (and dedup nothing with these).
   */
  chunks: z.object({ avg: z.number().int().min(64 * 1024).max(8 * 2 ** 20).refine((n) => (n & (n - 1)) === 0, "a power of two") }).strict().optional(),
});
export type SquashfsFormat = z.infer<typeof SquashfsFormat>;

export const ErofsFormat = z.object({
  kind: z.literal("erofs"),
  compression: z.enum(["none", "lz4", "lz4hc"]),
  level: z.number().int().min(0).max(12).optional(),
});
export type ErofsFormat = z.infer<typeof ErofsFormat>;

/**
 * The file-level content-addressed format (native/lazy/internal/filecas): the snapshot's object is a zstd-compressed
 * index of the tree's entries, each regular file's content a list of FastCDC chunks (`avgChunk`: min avg/4, max
 * 4·avg) held as zstd frames in packs, one pack per backup with only the chunks its lineage lacked. An incremental
 * reuses an unchanged file's chunk list without reading it. The chunking is part of the format, as for images.
 */
export const FilesFormat = z.object({
  kind: z.literal("files"),
  avgChunk: z.number().int().min(64 * 1024).max(2 * 2 ** 20).refine((n) => (n & (n - 1)) === 0, "a power of two"),
  level: z.number().int().min(1).max(22).optional(),
});
export type FilesFormat = z.infer<typeof FilesFormat>;

export const ImageFormat = z.discriminatedUnion("kind", [SquashfsFormat, ErofsFormat]);
export type ImageFormat = z.infer<typeof ImageFormat>;

/** Every archive format a snapshot can have. */
export const ArchiveFormat = z.discriminatedUnion("kind", [TarFormat, SquashfsFormat, ErofsFormat, FilesFormat]);
export type ArchiveFormat = z.infer<typeof ArchiveFormat>;

/** The file name extension of an archive format: tar, tar.zst, tar.gz, tar.lz4, sqsh, erofs. */
export function extensionOf(format: ArchiveFormat): string {
  // A chunked image's stored object is its index (the chunks live under chunks/, shared).
  if (format.kind === "squashfs" && format.chunks) return "sqsh.index.json";
  // Not "….index.json": the chunk collector reads those as image chunk indexes (chunk-gc.ts INDEX).
  if (format.kind === "files") return "fidx.zst";
  if (format.kind !== "tar") return format.kind === "squashfs" ? "sqsh" : "erofs";
  return { none: "tar", zstd: "tar.zst", gzip: "tar.gz", pigz: "tar.gz", lz4: "tar.lz4" }[format.compression];
}
