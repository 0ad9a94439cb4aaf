// The extract restore of the file-level format, made by the native engine (`snapflow-lazy files-unpack`,
// native/lazy/internal/filecas): one process reads the index (a sandbox file or the store's object, SHA-256 checked),
// validates it, fetches each chunk once over its pack's presigned URL (coalesced Range GETs), checks it against its
// name before writing it, makes the tree beneath the staging root through descriptors and, asked to, walks it. The
// agent only starts it (URLs on its stdin, never in argv) and reads its answer; no byte passes through Node.
//
//   index + packs' presigned GETs ──▶ snapflow-lazy files-unpack ──▶ the tree beneath staging
//                                       └──result JSON (fd 3)──▶ FilesUnpackResult, or its error / verify_failed
import { AgentError } from "../http/agent-error.ts";
import { FilesUnpackResult } from "../contract/protocol.ts";
import { storeIdleMs } from "../transfer/stall-deadline.ts";
import { agentManifestByteLimit } from "../manifest/manifest-file.ts";
import { verifyFailed } from "../manifest/tree-verify.ts";
import { askEngine } from "../system/engine-answer.ts";

/** What the engine is asked on its stdin line (cmd/snapflow-lazy/files_unpack.go filesUnpackRequest). */
export interface FilesUnpackRequest {
  index: { file: string; sha256?: string } | { url: string; sha256: string };
  packs: Record<string, string>;
  keepOwners: boolean;
  walk: boolean;
  concurrency: number;
  /** where the made tree's stat keys go (native/lazy/internal/filecas/stats.go), a host path */
  statsOut?: string;
  /** the snapshot's manifest, checked by its URL's origin; the index must agree with it */
  manifest?: { url: string; sha256: string };
}


/**
 * Runs the engine into `staging` (an empty directory). Answers its result when the tree is the index's; throws the
 * engine's error (its code and field), or verify_failed naming the first differences. The caller removes staging on
 * any failure (the engine leaves what it made so far).
 */
export async function filesUnpackWithEngine(bin: string, staging: string, request: FilesUnpackRequest): Promise<FilesUnpackResult> {
  const line = { ...request, idleSeconds: Math.max(1, Math.round(storeIdleMs() / 1000)), retries: 4, ...(request.manifest ? { maxManifestBytes: agentManifestByteLimit() } : {}) };
  const made = await askEngine([bin, "files-unpack", "--root", staging, "--result-fd", "3"], line, {
    result: FilesUnpackResult, lacking: () => new AgentError("unavailable", "snapflow-lazy here has no files-unpack subcommand"),
  });
  if (!made.equal) throw verifyFailed("the restored tree", made);
  return made;
}
