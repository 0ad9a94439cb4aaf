// The interface every backup transfer path implements: how archive bytes travel from the sandbox to the store.
// One module per path (BackupPath in the registry), gathered in index.ts; the transfer phase looks the path up
// and calls it, so adding a path is one file and one table line.
import type { Deps } from "../../deps.ts";
import type { AgentClient } from "../../sandbox/agent-client.ts";
import type { BackupStrategy } from "../../strategies/registry.ts";
import type { ArchiveResult, BackupParams, TransferResult } from "../backup-params.ts";

export interface BackupTransferContext {
  d: Deps;
  p: BackupParams;
  s: BackupStrategy;
  agent: AgentClient;
  /** the archive phase's result: a staged file, or (streaming paths) just the manifest and a delta plan */
  archived: ArchiveResult;
  /** the store key the archive goes to */
  key: string;
  /** performance.now() when the phase started, for ms and time-to-first-byte */
  started: number;
}

export interface BackupTransfer {
  /**
   * true: the archive is made while it uploads (from the live tar stream), so the archive phase stages nothing;
   * false: the archive phase writes it to a staging file first, and this path moves that file.
   */
  readonly streamsArchive: boolean;
  /**
   * true: a tar archive on this path is made in one read of the source, its manifest from the tar stream
   * (single-pass.ts); false: the archive phase takes the manifest by a walk of its own first.
   */
  readonly singlePass: boolean;
  /**
   * true: the bytes passed through the Worker on their way to the store and the Worker hashed them as they went
   * (sent.sha256 is its own digest, not the sandbox's word), so verify only checks that the store holds an object
   * of that size; false: the sandbox moved the bytes, and verify reads the stored object back.
   */
  readonly hashedByWorker: boolean;
  transfer(c: BackupTransferContext): Promise<TransferResult>;
  /**
   * Checks beyond the stored object's own size and SHA-256, which verify always makes (a chunked snapshot: every
   * chunk its index names is in the store). Returns figures for the verify step.
   */
  verifyStored?(c: { d: Deps; p: BackupParams; key: string; sent: TransferResult }): Promise<Record<string, unknown>>;
}
