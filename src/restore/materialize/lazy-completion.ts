// The second moment of a lazy restore: every chunk local and verified. The agent waits on the helper's status (one
// long request at a time, not a poll per 100 ms from the Worker); the image is complete, or the prefetcher ended
// without completing it — a chunk it could not have (missing from the store, or never matching its SHA-256 after the
// retries), which fails the restore with the chunk named, and the snapshots whose indexes reference it (the chunk is
// shared: they are damaged with it, and the next backup that has its content repairs them all): reads of it fail
// with EIO, no wrong byte is ever served.
import type { LazyStatus } from "../../../container/contract/protocol.ts";
import { describeReferences, snapshotsReferencing } from "../../chunks/chunk-references.ts";
import { errorMessage, SnapflowError } from "../../errors.ts";
import { readSnapshot, type StepResult } from "../../snapshots/records.ts";
import { DEFAULT_TENANT, tenantOf } from "../../snapshots/tenant.ts";
import type { RestoreContext } from "../restore-context.ts";

/** One wait request's bound; the verify step's own timeout bounds the whole wait. */
const WAIT_MS = 60_000;
/** The restore record lists at most this many on-demand chunks (the step result stays small). */
const LISTED = 200;

/** "chunk <sha> (#i): reason; …", or "" when nothing failed. */
export function failedChunks(status: Pick<LazyStatus, "failed"> | null): string {
  const failed = status?.failed ?? [];
  return failed.slice(0, 5).map((f) => `${f.reason.includes(f.sha256) ? f.reason : `chunk ${f.sha256}: ${f.reason}`} (#${f.index} in the index)`).join("; ") + (failed.length > 5 ? `; and ${failed.length - 5} more` : "");
}

/**
 * The restore's error for chunks the helper could not have (`status.failed`, the first five): `what`, the chunks
 * named, and the recorded snapshots whose indexes reference each (chunk-references.ts, bounded).
 */
export async function unusableChunks(c: Pick<RestoreContext, "d" | "p">, what: string, status: Pick<LazyStatus, "failed">, cause?: unknown): Promise<SnapflowError> {
  const digests = status.failed.slice(0, 5).map((f) => f.sha256);
  // Only the snapshot's own tenant's snapshots share its chunks, and only they may be named to this asker. A fork's
  // base is of the same tenant (the API refuses a base of another).
  const record = await readSnapshot(c.d.store, c.d.kv, c.p.snapshotId).catch(() => null);
  const tenant = record ? tenantOf(record) : (c.p.tenant ?? DEFAULT_TENANT);
  const refs = await snapshotsReferencing(c.d.store, tenant, digests).then(describeReferences, (e) => `; the snapshots that reference them could not be listed: ${errorMessage(e)}`);
  return new SnapflowError("snapshot_unusable", `${what}: ${failedChunks(status)}${refs}`, cause === undefined ? {} : { cause });
}

export async function waitComplete(c: RestoreContext, work: string): Promise<LazyStatus> {
  for (;;) {
    const status = await c.agent.lazyWait({ work, timeoutMs: WAIT_MS });
    if (status.state === "complete") return status;
    if (status.prefetch === "done" || status.prefetch === "off" || !status.running) {
      const what = `the image did not complete: ${status.chunks.local} of ${status.chunks.total} chunks are local`;
      if (status.failed.length) throw await unusableChunks(c, what, status);
      throw new SnapflowError("snapshot_unusable", `${what}; the helper ${status.running ? "stopped prefetching" : "stopped"}`);
    }
  }
}

/** What the restore records of a completed lazy image: when, and which chunks came on demand or ahead. */
export function completionOf(s: LazyStatus, requestedAt: string | undefined) {
  const completeAt = Date.parse(s.startedAt) + s.completeMs;
  return {
    // From the restore request (the Worker's clock) to the helper's last chunk (the sandbox's clock).
    ...(requestedAt ? { completeMs: completeAt - Date.parse(requestedAt) } : {}),
    mountCompleteMs: s.completeMs,
    lazy: {
      chunks: s.chunks,
      bytes: s.bytes,
      fetchAttempts: s.fetchAttempts,
      firstReadMs: s.firstReadMs,
      onDemandChunks: s.onDemandChunks.slice(0, LISTED).map((c) => ({ index: c.index, sha256: c.sha256, atMs: c.atMs })),
    },
  };
}

/**
 * After a lazy tree's swap, for the lazy materializations and a lazy overlay base: walk the tree at the target (the
 * reads fetch what they need; one that fails with EIO is a chunk the helper could not have, named in the error), then
 * wait until every chunk is local and verified (complete).
 */
export async function walkThenComplete(c: RestoreContext, work: string, check: (path: string) => Promise<StepResult>) {
  let checked;
  try {
    checked = await check(c.p.path);
  } catch (e) {
    // The helper writes its status at most every 200 ms: give a failure just made a moment to show.
    const status = await c.agent.lazyWait({ work, timeoutMs: 1000 }).catch(() => null);
    if (status?.failed.length) throw await unusableChunks(c, "reading the restored tree failed", status, e);
    throw e;
  }
  const status = await waitComplete(c, work);
  return { ...checked, ...completionOf(status, c.p.startedAt) };
}
