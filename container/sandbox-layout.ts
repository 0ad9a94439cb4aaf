// Where things live inside a sandbox, for both sides: the agent (its own areas, the roots it confines paths to)
// and the Worker (where it asks the agent to stage, mount and mark things). The user's tree is under /workspace;
// everything snapflow itself writes is under /snapflow, one directory per kind of thing, so a restore or a cleanup
// never touches the user's files by accident. Pure strings, no imports: both sides and protocol.ts can use it.

/** The roots a caller may name by default (the Sandbox SDK's own backups allow these); configurable: sandbox-roots.ts. */
export const DEFAULT_USER_ROOTS = ["/workspace", "/home", "/app", "/tmp", "/var/tmp"] as const;

/** snapflow's own area: always a root of the agent's, never a configured one. */
export const AGENT_AREA = "/snapflow";

/** The default roots a sandbox path may live under; the agent maps them below the sandbox's root directory. */
export const SANDBOX_ROOTS = [...DEFAULT_USER_ROOTS, AGENT_AREA] as const;

/** snapflow's own areas, under /snapflow. */
export const SANDBOX_DIRS = {
  /** archives staged before upload or downloaded before extraction, and delta lists */
  staging: "/snapflow/staging",
  /** downloaded images: each backs its mount for as long as the mount lives */
  images: "/snapflow/images",
  /** mount points of images that serve as an overlay's lower dir */
  mnt: "/snapflow/mnt",
  /** overlay layers (upper and work dirs), one directory per overlay */
  overlays: "/snapflow/overlays",
  /** markers recording which dataset spec a benchmark source holds */
  datasets: "/snapflow/datasets",
  /** lazy mounts, one directory each: the FUSE file's mountpoint, its URL file and status file */
  lazy: "/snapflow/lazy",
  /**
   * verified chunks, by SHA-256: shared by every lazy mount in the sandbox, so a restore of a fork fetches only the
   * chunks its parent's restore did not
   */
  chunkCache: "/snapflow/chunks",
} as const;

/** A lazy mount's own directory. */
export const lazyWorkPath = (id: string) => `${SANDBOX_DIRS.lazy}/${id}`;

/** An archive staged under `id`; `ext` is the format's extension (protocol.ts extensionOf). */
export const stagingPath = (id: string, ext: string) => `${SANDBOX_DIRS.staging}/${id}.${ext}`;

/** A delta's list of changed entries (NUL-separated, for tar -T). */
export const deltaListPath = (id: string) => `${SANDBOX_DIRS.staging}/${id}.delta-list`;

/** A downloaded image; `ext` is the format's extension (protocol.ts extensionOf). */
export const imagePath = (id: string, ext: string) => `${SANDBOX_DIRS.images}/${id}.${ext}`;

/** Where an image is mounted to serve as an overlay's lower dir. */
export const mountPath = (id: string) => `${SANDBOX_DIRS.mnt}/${id}`;

/** An overlay's layer directory and the upper and work dirs in it. */
export function overlayLayer(name: string): { layer: string; upper: string; work: string } {
  const layer = `${SANDBOX_DIRS.overlays}/${name}`;
  return { layer, upper: `${layer}/upper`, work: `${layer}/work` };
}

/** The marker recording which dataset spec the benchmark source `name` holds. */
export const datasetMarkerPath = (name: string) => `${SANDBOX_DIRS.datasets}/${name}.json`;
