// "Talk to a sandbox": the one seam between snapflow and where sandboxes actually run.
//
// - agentFetch: an HTTP request to the snapflow agent inside the sandbox (raw bytes both ways, no base64).
// - readFileBase64 / readFileStreamBase64: a file read the way the Sandbox SDK's file API does it (base64 in
//   JSON, or base64 in server-sent events), kept for the sdk-base64 baselines that show what that costs.
// - destroy: end the sandbox (production: the container; local: its root directory).
//
// Implementations: sdk-transport.ts (@cloudflare/sandbox, production) and local-transport.ts (the same agent
// code as a host process over loopback, one root directory per sandbox id). One conformance suite states the
// contract: test/workers/transport-conformance-integration.test.ts, run against local; sandbox needs a real
// container (Docker, a Cloudflare account), so there it is type-checked only.

import type { AgentDeadlines } from "./agent-deadlines.ts";

export interface SandboxTransport {
  readonly kind: "sandbox" | "local";
  /** how long AgentClient waits for this transport's agents (agent-deadlines.ts); absent: the defaults */
  readonly deadlines?: AgentDeadlines;
  agentFetch(sandboxId: string, path: string, init?: RequestInit): Promise<Response>;
  readFileBase64(sandboxId: string, path: string): Promise<string>;
  /** the file's bytes, decoded from the SDK's base64 event stream */
  readFileStreamBase64(sandboxId: string, path: string): Promise<ReadableStream<Uint8Array>>;
  destroy(sandboxId: string): Promise<void>;
  /**
   * The Sandbox SDK's own backup of `dir` (its createBackup: squashfs made in the container, uploaded by it to the
   * BACKUP_BUCKET binding's bucket at backups/<id>/data.sqsh, with meta.json beside it). SDK containers only: the
   * local transport has none, and the sdk-backup preset is unavailable there.
   */
  sdkBackup?(sandboxId: string, options: { dir: string; name?: string; excludes?: string[]; gitignore?: boolean }): Promise<{ id: string; dir: string }>;
  /**
   * The Sandbox SDK's own restore (its restoreBackup): the backup `id` (a UUID, at backups/<id>/ in the
   * BACKUP_BUCKET binding's bucket) downloaded by the container and mounted at `dir`, writable. SDK containers only.
   */
  sdkRestore?(sandboxId: string, backup: { id: string; dir: string }): Promise<void>;
}
