// "Usable before it is downloaded", measured as a user meets it: POST a lazy restore, wait until the workspace
// answers at its target (the host directory the sandbox's /workspace is), run a first-use command there, and read
// the lazy mount's status at that moment — how many bytes of the image were local then, and how many of them the
// reads asked for (on demand) rather than the background prefetcher (ahead). Then follow the restore to its end
// (every chunk local and verified). Pure orchestration over the API and the host's view of the sandbox.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { LazyStatus } from "../../../container/contract/protocol.ts";
import { STATUS_WAIT_SECONDS, type apiClient, type RunStatus } from "../../cli/api-client.ts";
import { sh } from "../peers/shell.ts";
import { swappedInByTransfer, usableStep } from "../../../src/restore/usable-step.ts";

export interface FirstUse {
  restoreId: string;
  /** POST → the marker file answers at the target */
  usableSeenMs: number;
  /** the first-use command's own time, and POST → it succeeded */
  commandMs: number;
  firstUseDoneMs: number;
  /**
   * the lazy mount's bytes when the command had succeeded; `readBytes`: the chunks the mount had read from (first
   * use, and the verify step's walk), whoever fetched them
   */
  atFirstUse: { imageBytes: number; localBytes: number; onDemandBytes: number; aheadBytes: number; readBytes: number; onDemandChunks: number; readChunks: number; chunks: number };
  /** POST → complete (every chunk local and verified), and the Workflow's own moments */
  completeMs: number;
  usableMs?: number;
  workflowCompleteMs?: number;
  /** where the time to usable went: each step's ms up to verify, and the materialize step's parts (lazy.ts) */
  toUsable?: Record<string, number>;
}

/** The step times and the lazy materialization's parts that add up to usableMs, from the run's step results. */
export function toUsable(steps: Record<string, unknown>): Record<string, number> {
  const out: Record<string, number> = {};
  // A transfer that swapped the tree in (a lazy mount, a file-level wake: run-restore.ts) has no materialize step.
  const inAtTransfer = swappedInByTransfer(steps as Record<string, object>);
  for (const step of inAtTransfer ? ["probe", "transfer"] : ["probe", "transfer", "materialize"]) {
    const ms = (steps[step] as { ms?: number } | undefined)?.ms;
    if (typeof ms === "number") out[`${step}Ms`] = ms;
  }
  // The transfer's parts (overlay-plan.ts): the base in, the base (or its files mount) ready — the helper's own
  // moment, and the agent's call around it — the deltas extracted (and the agent's extraction alone).
  const tr = (steps.transfer ?? {}) as Record<string, unknown>;
  for (const k of ["baseInMs", "baseDoneMs", "deltasDoneMs", "deltaExtractMs", "baseReadyMs", "baseMountMs"]) if (typeof tr[k] === "number") out[`transfer.${k}`] = tr[k] as number;
  // The step that swapped the tree in: its materialization's parts (a lazy mount's, a fork's base and overlay).
  const m = (usableStep(steps as Record<string, object>) ?? {}) as Record<string, unknown>;
  // The lazy materializations' parts, and the overlay plan's (a fork: its base's lazy mount, then the overlay).
  for (const k of ["clearMs", "signedMs", "presignMs", "fuseMs", "helperReadyMs", "imageMountMs", "mountedAfterStepMs", "servingAfterStepMs", "baseMountMs", "baseFuseMs", "baseImageMountMs", "stackMs", "overlayMs"]) if (typeof m[k] === "number") out[k] = m[k] as number;
  // The swap at the end of a lazy materialization (usableNow), and from that materialization's start to usable.
  for (const k of ["swapMs", "mountAtMs", "usableAfterMaterializeMs"]) if (typeof m[k] === "number") out[k] = m[k] as number;
  // The swapping step's whole attempt, its clearing calls included.
  if (typeof m.startedAt === "number" && typeof m.endedAt === "number") out[inAtTransfer ? "transferStepWallMs" : "materializeStepWallMs"] = m.endedAt - m.startedAt;
  return out;
}

const POLL_MS = 10;

/**
 * `sandboxDir`: the host directory of the sandbox's root; `marker`: a path below /workspace whose presence means
 * the tree answers; `command`: run with cwd = the target's host directory.
 */
export async function measureFirstUse(api: ReturnType<typeof apiClient>, o: { snapshotId: string; sandboxId: string; sandboxDir: string; strategy: string; marker: string; command: string; timeoutMs?: number }): Promise<FirstUse> {
  const target = join(o.sandboxDir, "workspace");
  const t0 = performance.now();
  const { id } = await api.startRestore({ snapshotId: o.snapshotId, sandboxId: o.sandboxId, path: "/workspace", strategy: o.strategy });
  const deadline = t0 + (o.timeoutMs ?? 10 * 60_000);
  while (!existsSync(join(target, o.marker))) {
    if (performance.now() > deadline) throw new Error(`restore ${id}: ${o.marker} never appeared at ${target}`);
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
  const usableSeenMs = Math.round(performance.now() - t0);
  const ran = await sh(o.command, { cwd: target });
  const firstUseDoneMs = Math.round(performance.now() - t0);
  const status = JSON.parse(readFileSync(join(o.sandboxDir, "snapflow", "lazy", id, "status.json"), "utf8")) as LazyStatus;
  // Held until the run ends (until=end): polled every 100 ms, each answer cost the Worker a status of the Workflow's
  // instance, CPU the completing restore shares.
  let final: RunStatus;
  for (;;) {
    final = await api.call<RunStatus>("GET", `/api/restores/${id}?wait=${STATUS_WAIT_SECONDS}&until=end`);
    if (final.status === "complete") break;
    if (final.status === "errored" || final.status === "terminated") throw new Error(`restore ${id} ${final.status}: ${final.error ?? ""}`);
    if (performance.now() > deadline) throw new Error(`restore ${id} still ${final.status}`);
  }
  const verify = final.steps.verify as { completeMs?: number } | undefined;
  const materialize = usableStep(final.steps) as { usableMs?: number } | undefined;
  return {
    restoreId: id, usableSeenMs, commandMs: ran.ms, firstUseDoneMs,
    atFirstUse: { imageBytes: status.bytes.total, localBytes: status.bytes.local, onDemandBytes: status.bytes.onDemand, aheadBytes: status.bytes.ahead, readBytes: status.bytes.read, onDemandChunks: status.chunks.onDemand, readChunks: status.chunks.read, chunks: status.chunks.total },
    completeMs: Math.round(performance.now() - t0), usableMs: materialize?.usableMs, workflowCompleteMs: verify?.completeMs,
    toUsable: toUsable(final.steps),
  };
}
