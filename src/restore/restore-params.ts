// What a restore is asked to do (the RestoreWorkflow's params) and what its probe hands the later phases.
import type { IndexObject, SnapshotRecord, StepResult } from "../snapshots/records.ts";

export interface RestoreParams {
  restoreId: string;
  snapshotId: string;
  sandboxId: string;
  path: string;
  strategy: string;
  /**
   * the tenant the API caller named, checked against the snapshot's when the run was accepted; the chunks are read
   * from the snapshot record's tenant all the same (absent: the default tenant)
   */
  tenant?: string;
  /** allow restoring over a non-empty target (it is swapped out once the new tree is verified, and removed once recorded) */
  replace: boolean;
  /**
   * give restored entries the owners (numeric uid/gid) and setuid/setgid bits the snapshot holds, and verify them;
   * off by default: they go to the agent's user, the bits cleared (a snapshot may come from another, untrusted
   * sandbox). Device nodes are removed either way; mounts are nosuid,nodev either way.
   */
  keepOwnership?: boolean;
  /** drop the page cache in the probe step (cold-cache runs) */
  dropCaches?: boolean;
  /**
   * hash every restored file again in the verify step. Off by default: extracted archives are checked entry by
   * entry as they stream into tar, and a mounted image by its own SHA-256 during download; verify then walks
   * metadata only.
   */
  deepVerify?: boolean;
  /** when the API accepted the request (progress shows it) */
  startedAt?: string;
  /** the sandbox is the run's own (a background content check's, background-check.ts): ended when the run ends */
  endSandbox?: boolean;
  /**
   * a compaction's wake (workflows/compact-workflow.ts): the backup after it reads only what the chain's layers
   * changed, so a file-level base fetches chunks on demand only and is not waited for
   */
  compactor?: boolean;
  /**
   * set by POST /api/restores (never by the caller: the request schema is strict): the restore's lease on its snapshot
   * (restore-leases.ts) was taken before the Workflow was created, so the probe reads the record while it refreshes
   * the lease rather than after, and keeps the lease when it fails (the run's failure path releases it)
   */
  leasedByRequest?: true;
}

/** One archive to bring: a full snapshot's, or one layer of a delta chain (its deletions beside it). */
/** `manifest`: an overlay chain's layers carry theirs, which verify applies in turn (manifest-source.ts). */
export type Layer = Pick<SnapshotRecord, "id" | "format" | "archive"> & {
  deletedKey?: string;
  manifest?: Pick<SnapshotRecord["manifest"], "key" | "sha256" | "layerOf">;
  /** a file-level base: the store keys of the packs its record names (its tenant's), read at probe */
  packKeys?: Record<string, string>;
  /** a file-level base whose index is a layer: the objects beneath it, whole index first (its record's files.chain) */
  chain?: IndexObject[];
};

export interface RestoreProbeResult extends StepResult {
  /** `chunks` and `tenant` too for a chunked image: a lazy mount signs its first URLs from them, not from the record read again */
  snapshot: Pick<SnapshotRecord, "id" | "format" | "archive" | "manifest"> & Partial<Pick<SnapshotRecord, "chunks" | "tenant">>;
  /** a delta snapshot: its base first, then each delta up to this one; a full snapshot: just itself */
  layers: Layer[];
  /**
   * where the new tree is built (beside the target, same filesystem) and where the old one is kept until the restore
   * is recorded (container/extract/tree-swap.ts): the target itself is not touched before verify swaps the new tree in
   */
  swap: { staged: string; old: string };
  /** why verify hashes every file where no stream check did (content-check.ts), or absent when the image's SHA-256 suffices */
  contentCheck?: string;
  /** the target held something when probed (absent in runs probed before this field: verify falls back on the swap's hadTarget) */
  replacing?: boolean;
}
