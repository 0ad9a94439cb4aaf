// The seed reports' own published figures, per preset, so that results tables can set ours beside theirs. Seconds,
// as published; "where" says which of their machines and which column. Data only.
export interface SeedFigure {
  seed: string;
  /** what the figure times: a backup's total, a restore's total (or median), or create/restore of seed 003 */
  phase: "backup" | "restore";
  seconds: number | null;
  where: string;
  note?: string;
  /** the matrix dataset that reproduces the seed's workload; figures are compared only on it */
  dataset: string;
}

const R2 = "r2-backup-restore-benchmark.md";
const LOCAL = "r2-backup-benchmark-local.md";
const S003 = "snapshot-create-restore-benchmark.md";
const prod = "Cloudflare standard-4 (4 vCPU, 12 GiB)";
const docker = "local Docker on Apple Silicon";
const hetzner = "Hetzner cx43 (8 vCPU), 100 MB added to a ~190 MB base";

export const SEED_FIGURES: Record<string, SeedFigure[]> = {
  "tar-zst-direct": [{ dataset: "node-modules", seed: R2, phase: "backup", seconds: 10.9, where: prod }, { dataset: "node-modules", seed: LOCAL, phase: "backup", seconds: 4.0, where: docker }],
  "tar-zst-fast-direct": [{ dataset: "node-modules", seed: R2, phase: "backup", seconds: 22.4, where: prod }, { dataset: "node-modules", seed: LOCAL, phase: "backup", seconds: 4.1, where: docker }],
  "tar-direct": [{ dataset: "node-modules", seed: R2, phase: "backup", seconds: 29.7, where: prod }, { dataset: "node-modules", seed: LOCAL, phase: "backup", seconds: 8.8, where: docker }],
  "tar-gz-direct": [{ dataset: "node-modules", seed: R2, phase: "backup", seconds: 35.4, where: prod }, { dataset: "node-modules", seed: LOCAL, phase: "backup", seconds: 17.7, where: docker }],
  "tar-zst-fast-chunked": [{ dataset: "node-modules", seed: R2, phase: "backup", seconds: 22.4, where: prod }, { dataset: "node-modules", seed: LOCAL, phase: "backup", seconds: 16.4, where: docker }],
  "tar-zst-pipe": [{ dataset: "node-modules", seed: R2, phase: "backup", seconds: null, where: prod, note: "OOM in the Worker (~220 MB buffered)" }, { dataset: "node-modules", seed: LOCAL, phase: "backup", seconds: 3.6, where: docker }],
  "tar-zst-fast-pipe": [{ dataset: "node-modules", seed: R2, phase: "backup", seconds: null, where: prod, note: "OOM in the Worker" }, { dataset: "node-modules", seed: LOCAL, phase: "backup", seconds: 3.7, where: docker }],
  "tar-pipe": [{ dataset: "node-modules", seed: R2, phase: "backup", seconds: null, where: prod, note: "OOM in the Worker" }, { dataset: "node-modules", seed: LOCAL, phase: "backup", seconds: 8.0, where: docker }],
  "squashfs-zstd": [{ dataset: "node-modules", seed: R2, phase: "backup", seconds: 29.4, where: prod }],
  "squashfs-lz4": [{ dataset: "node-modules", seed: R2, phase: "backup", seconds: 13.9, where: prod }],
  "squashfs-lzo": [{ dataset: "node-modules", seed: R2, phase: "backup", seconds: 30.2, where: prod }],
  "presigned-squashfs-mount": [{ dataset: "node-modules", seed: R2, phase: "restore", seconds: 2.2, where: prod }],
  "presigned-squashfuse-mount": [{ dataset: "node-modules", seed: R2, phase: "restore", seconds: 2.3, where: prod }],
  "presigned-squashfs-mount-aria2c": [{ dataset: "node-modules", seed: R2, phase: "restore", seconds: 2.3, where: prod }],
  "presigned-squashfs-lz4-mount": [{ dataset: "node-modules", seed: R2, phase: "restore", seconds: 3.8, where: prod }],
  "presigned-tar-zst1-pipe": [{ dataset: "node-modules", seed: R2, phase: "restore", seconds: 4.5, where: prod }],
  "presigned-tar-zst-pipe": [{ dataset: "node-modules", seed: R2, phase: "restore", seconds: 4.7, where: prod }],
  "presigned-tar-zst": [{ dataset: "node-modules", seed: R2, phase: "restore", seconds: 48.9, where: prod }],
  "presigned-squashfs-extract": [{ dataset: "node-modules", seed: R2, phase: "restore", seconds: 51.2, where: prod }],
  // The seeds' restore-* strategies ran archive + extract inside the container (no store); ours fetch from the store.
  "restore-tar": [{ dataset: "node-modules", seed: R2, phase: "restore", seconds: 15.2, where: `${prod}, in-container archive+extract` }, { dataset: "node-modules", seed: R2, phase: "restore", seconds: 1.4, where: `${docker}, in-container` }],
  "restore-tar-zst": [{ dataset: "node-modules", seed: R2, phase: "restore", seconds: 54.0, where: `${prod}, in-container archive+extract` }, { dataset: "node-modules", seed: R2, phase: "restore", seconds: 5.1, where: `${docker}, in-container` }],
  "restore-tar-zst-pipe": [{ dataset: "node-modules", seed: R2, phase: "restore", seconds: 53.8, where: `${prod}, in-container pipeline` }, { dataset: "node-modules", seed: R2, phase: "restore", seconds: 3.4, where: `${docker}, in-container` }],
  "restore-tar-gz": [{ dataset: "node-modules", seed: R2, phase: "restore", seconds: 82.2, where: `${prod}, in-container archive+extract` }, { dataset: "node-modules", seed: R2, phase: "restore", seconds: 21.7, where: `${docker}, in-container` }],
  "restore-squashfs-mount": [{ dataset: "node-modules", seed: R2, phase: "restore", seconds: 20.9, where: `${prod}, in-container mksquashfs+mount` }],
  "restore-squashfs-extract": [{ dataset: "node-modules", seed: R2, phase: "restore", seconds: 72.2, where: `${prod}, in-container` }, { dataset: "node-modules", seed: R2, phase: "restore", seconds: 25.1, where: `${docker}, in-container` }],
  "overlay-delta": [{ dataset: "node-modules", seed: R2, phase: "backup", seconds: 0.6, where: `${prod}, a ~10 MB delta` }],
  "overlay-restore": [{ dataset: "node-modules", seed: R2, phase: "restore", seconds: 2.6, where: `${prod}, base + ~10 MB delta` }],
  "pigz-file": [{ dataset: "base-plus-100mb", seed: S003, phase: "backup", seconds: 10.6, where: hetzner }, { dataset: "base-plus-100mb", seed: S003, phase: "restore", seconds: 12.2, where: hetzner }],
  "zstd-file": [{ dataset: "base-plus-100mb", seed: S003, phase: "backup", seconds: 7.9, where: hetzner }, { dataset: "base-plus-100mb", seed: S003, phase: "restore", seconds: 5.6, where: hetzner }],
  "lz4-file": [{ dataset: "base-plus-100mb", seed: S003, phase: "backup", seconds: 8.0, where: hetzner }, { dataset: "base-plus-100mb", seed: S003, phase: "restore", seconds: 7.6, where: hetzner }],
  "pigz-stream": [{ dataset: "base-plus-100mb", seed: S003, phase: "backup", seconds: 8.4, where: hetzner }, { dataset: "base-plus-100mb", seed: S003, phase: "restore", seconds: 6.3, where: hetzner }],
  "zstd-stream": [{ dataset: "base-plus-100mb", seed: S003, phase: "backup", seconds: 6.6, where: hetzner }, { dataset: "base-plus-100mb", seed: S003, phase: "restore", seconds: 5.8, where: hetzner }],
};

/** Seed presets a matrix cell cannot measure, and why. */
export const NOT_MEASURED_BY_A_MATRIX: Record<string, string> = {
  "overlay-delta": "needs a workspace mounted by overlay-restore and changes made in it; exercised by test/workers/overlay-integration.test.ts, not timed by a matrix cell",
  "overlay-restore": "restores an overlay-delta (see overlay-delta)",
};
