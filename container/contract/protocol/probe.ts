// What a sandbox can do: its tools (with their packages and version flags), the release, the probe's answer.
// Part of the agent's protocol (../protocol.ts re-exports every part): both sides import it.

/**
 * Every tool a strategy may drive, with the Debian package that installs it (the Dockerfile installs all); pkg null:
 * built from this repository (native/), copied into the image by its own Dockerfile stage and put on the host
 * agent's PATH by the local stack.
 */
export const TOOLS = {
  tar: { pkg: "tar", version: ["--version"] },
  zstd: { pkg: "zstd", version: ["--version"] },
  gzip: { pkg: "gzip", version: ["--version"] },
  pigz: { pkg: "pigz", version: ["--version"] },
  lz4: { pkg: "lz4", version: ["--version"] },
  mksquashfs: { pkg: "squashfs-tools", version: ["-version"] },
  // squashfs from a tar stream, so an image backup reads the tree once (image-with-manifest.ts); optional
  tar2sqfs: { pkg: "squashfs-tools-ng", version: ["--version"] },
  // prints its version and exits 1 (squashfs-tools 4.5): the probe reads what a tool prints, whatever its status
  unsquashfs: { pkg: "squashfs-tools", version: ["-version"] },
  squashfuse: { pkg: "squashfuse", version: ["--version"] },
  squashfuse_ll: { pkg: "squashfuse", version: ["--version"] },
  "fuse-overlayfs": { pkg: "fuse-overlayfs", version: ["--version"] },
  fusermount3: { pkg: "fuse3", version: ["--version"] },
  // No --version before erofs-utils 1.8 (Debian 12 has 1.5, Ubuntu 22.04 1.4). mkfs.erofs prints "mkfs.erofs 1.x"
  // before it parses its options since 1.4 (then refuses -V, exit 1) and answers -V since 1.8; fsck.erofs has -V.
  "mkfs.erofs": { pkg: "erofs-utils", version: ["-V"] },
  "fsck.erofs": { pkg: "erofs-utils", version: ["-V"] },
  curl: { pkg: "curl", version: ["--version"] },
  aria2c: { pkg: "aria2", version: ["--version"] },
  // snapflow's release and the Go that built it (native/lazy/cmd/snapflow-lazy/version.go)
  "snapflow-lazy": { pkg: null, version: ["version"] },
} as const satisfies Record<string, { pkg: string | null; version: string[] }>;
export type ToolName = keyof typeof TOOLS;

/**
 * snapflow's release (package.json "version"; test/node/probe-versions-unit.test.ts keeps them equal). The agent
 * reports the one it was built with and the Worker compares it with its own (`snapflow doctor`): an image built from
 * another release answers another protocol.
 */
export const SNAPFLOW_RELEASE = "0.1.0";

export interface ProbeResult {
  /** the agent's build: absent from agents older than the field */
  agent?: { release: string };
  kernel: string;
  filesystems: string[];
  fuse: boolean;
  capSysAdmin: boolean;
  root: boolean;
  tools: Record<string, { path: string; version: string } | null>;
  cpus: number;
  memory: { totalBytes: number; freeBytes: number };
  disk: { path: string; freeBytes: number; totalBytes: number };
  runtime: string;
}
