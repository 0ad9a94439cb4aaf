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
  /**
   * restores swapping a new tree into place (tree-swap.ts): one journal per restore until it is committed or rolled
   * back, and the new and old trees of a target that is itself a root (it has no sibling inside the roots)
   */
  swaps: "/snapflow/swaps",
  /**
   * the whole-tree manifests of this sandbox's last backups, by snapshot id (manifest-kept.ts): the next delta's
   * base, read here instead of from the store when its SHA-256 is the one the base's record keeps
   */
  manifests: "/snapflow/manifests",
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

/**
 * A woken overlay delta chain: each delta extracted into its own read-only layer directory (below the overlay's
 * layer directory, side by side, so a mount can name them relative to their parent), and its image's mount, under
 * the read-only overlay of them all at mountPath(id).
 */
export const chainLayersPath = (id: string) => `${SANDBOX_DIRS.overlays}/${id}/lower`;
export const chainLayerPath = (id: string, i: number) => `${chainLayersPath(id)}/${i}`;
export const chainImagePath = (id: string) => `${SANDBOX_DIRS.mnt}/${id}.image`;

/** The marker recording which dataset spec the benchmark source `name` holds. */
export const datasetMarkerPath = (name: string) => `${SANDBOX_DIRS.datasets}/${name}.json`;

/** A restore's swap journal (tree-swap.ts). */
export const swapJournalPath = (id: string) => `${SANDBOX_DIRS.swaps}/${id}.json`;

/** Names of a restore's new and old trees beside its target: a backup or a person can tell them for ours. */
export const SWAP_NAME = /^\.snapflow-(new|old)-[A-Za-z0-9._-]+$/;

/**
 * Where a restore builds the new tree and keeps the old one until the new one is recorded: beside the target, so
 * that both are on the target's filesystem and the swap is a rename. A target that is itself a root
 * (/workspace) has no parent inside the roots: its trees go under /snapflow/swaps, which the swap checks is on
 * the same filesystem.
 */
export function swapPlaces(target: string, id: string, roots: readonly string[]): { staged: string; old: string } {
  if (roots.includes(target)) return { staged: `${SANDBOX_DIRS.swaps}/${id}.new`, old: `${SANDBOX_DIRS.swaps}/${id}.old` };
  const parent = target.slice(0, target.lastIndexOf("/"));
  return { staged: `${parent}/.snapflow-new-${id}`, old: `${parent}/.snapflow-old-${id}` };
}
