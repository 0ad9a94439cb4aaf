// Named matrices: the cron trigger starts one of these (NIGHTLY_MATRIX), and the CLI can name them.
import type { z } from "zod";
import type { MatrixSpec } from "./matrix-spec.ts";

/** The seeds' workload: the sandbox-sdk repo with node_modules, ~692 MB in ~34.5k files. */
const nodeModules = { name: "node-modules", kind: "node-modules", seed: 1, files: 34_500, bytes: 692_000_000 } as const;

/** Specs as written (defaults apply when the API or the cron handler parses them). */
export const MATRIX_PRESETS: Record<string, z.input<typeof MatrixSpec>> = {
  /** A few minutes: one small dataset, the recommended path and the baseline. */
  smoke: {
    name: "smoke",
    datasets: [{ name: "small", kind: "node-modules", seed: 1, files: 2000, bytes: 20_000_000 }],
    backups: ["tar-zst-pipe", "squashfs-zstd-3"],
    restores: ["presigned-tar-zst-pipe", "presigned-squashfuse-mount"],
    runs: 3, isolated: true, dropCaches: true,
  },
  /**
   * The seeds' presets on their workload, three runs each: every seed backup with a restore of its format, and every
   * seed restore with a backup it reads. The squashfs restores read zstd level-3 images (mksquashfs's default level
   * takes ~90 s on this workload here; squashfs-zstd itself is measured once, with presigned-squashfs-mount).
   */
  seeds: {
    name: "seeds",
    datasets: [nodeModules],
    backups: ["tar-zst-direct", "tar-zst-fast-direct", "tar-direct", "tar-gz-direct", "tar-zst-fast-chunked", "tar-zst-pipe", "tar-zst-fast-pipe", "tar-pipe", "squashfs-zstd", "squashfs-zstd-3", "squashfs-lz4", "squashfs-lzo"],
    pairs: [
      { backup: "tar-zst-direct", restore: "presigned-tar-zst-pipe" },
      { backup: "tar-zst-fast-direct", restore: "presigned-tar-zst1-pipe" },
      { backup: "tar-direct", restore: "restore-tar" },
      { backup: "tar-gz-direct", restore: "restore-tar-gz" },
      { backup: "tar-zst-fast-chunked", restore: "restore-tar-zst-pipe" },
      { backup: "tar-zst-pipe", restore: "restore-tar-zst" },
      { backup: "tar-zst-fast-pipe", restore: "presigned-tar-zst" },
      { backup: "tar-pipe", restore: "restore-tar" },
      { backup: "squashfs-zstd", restore: "presigned-squashfs-mount" },
      { backup: "squashfs-zstd-3", restore: "presigned-squashfuse-mount" },
      { backup: "squashfs-zstd-3", restore: "presigned-squashfs-mount-aria2c" },
      { backup: "squashfs-zstd-3", restore: "presigned-squashfs-extract" },
      { backup: "squashfs-zstd-3", restore: "restore-squashfs-mount" },
      { backup: "squashfs-zstd-3", restore: "restore-squashfs-extract" },
      { backup: "squashfs-lz4", restore: "presigned-squashfs-lz4-mount" },
      { backup: "squashfs-lzo", restore: "presigned-squashfuse-mount" },
    ],
    runs: 3, isolated: true, dropCaches: true, concurrency: 1,
  },
  /** snapshot-create-restore-benchmark.md's techniques on its 100 MB shape (a ~190 MB base plus 100 MB added). */
  "seed-003": {
    name: "seed-003",
    datasets: [{ name: "base-plus-100mb", kind: "added-data", seed: 1, files: 10_000, bytes: 190_000_000, addedBytes: 100_000_000 }],
    backups: ["pigz-file", "zstd-file", "lz4-file", "pigz-stream", "zstd-stream"],
    pairs: [
      { backup: "pigz-file", restore: "restore-tar-gz" },
      { backup: "zstd-file", restore: "restore-tar-zst" },
      { backup: "lz4-file", restore: "restore-tar-lz4" },
      { backup: "pigz-stream", restore: "restore-tar-gz-pipe" },
      { backup: "zstd-stream", restore: "restore-tar-zst-pipe" },
    ],
    runs: 3, isolated: true, dropCaches: true, concurrency: 1,
  },
};
