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
  /** The seeds' backup and restore presets on their workload, three runs each. */
  seeds: {
    name: "seeds",
    datasets: [nodeModules],
    backups: ["tar-zst-direct", "tar-zst-fast-direct", "tar-direct", "tar-gz-direct", "tar-zst-fast-chunked", "tar-zst-pipe", "tar-zst-fast-pipe", "tar-pipe", "squashfs-zstd", "squashfs-lz4", "squashfs-lzo"],
    restores: ["presigned-squashfs-mount", "presigned-squashfuse-mount", "presigned-squashfs-mount-aria2c", "presigned-squashfs-lz4-mount", "presigned-tar-zst-pipe", "presigned-tar-zst", "presigned-squashfs-extract", "restore-tar", "restore-tar-zst", "restore-tar-zst-pipe", "restore-tar-gz", "restore-squashfs-mount", "restore-squashfs-extract"],
    runs: 3, isolated: true, dropCaches: true,
  },
};
