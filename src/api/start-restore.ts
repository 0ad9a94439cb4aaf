// POST /api/restores once the snapshot is known to be the caller's: the strategy settled (the request's, or the
// default for the snapshot's format), then the RestoreWorkflow started under the target's lease (start-run.ts). The
// route has taken the restore's lease on the snapshot already (`lease`): it must be in the store before the run's
// probe reads the record beside refreshing it (restore-leases.ts), so the Workflow is created only after it is.
import type { z } from "zod";
import type { Deps } from "../deps.ts";
import { SnapflowError } from "../errors.ts";
import type { RestoreParams } from "../restore/restore-params.ts";
import { refuseNonEmptyTarget } from "../restore/target-check.ts";
import { startRunUnderLease } from "../runs/start-run.ts";
import { AgentClient } from "../sandbox/agent-client.ts";
import { readOverlayChain } from "../snapshots/overlay-chain.ts";
import type { SnapshotRecord } from "../snapshots/records.ts";
import { formatName, restoresForSnapshot } from "../strategies/registry.ts";
import { defaultRestore } from "./default-restore.ts";
import { json } from "./http.ts";
import type { RestoreRequest } from "./schemas.ts";

export async function startRestoreRun(env: Env, d: Deps, body: z.infer<typeof RestoreRequest>, snapshot: SnapshotRecord, id: string, lease: Promise<void>, arrived = new Date().toISOString()): Promise<Response> {
  // An overlay delta is restored over its chain's image (or the compaction it resolves through): its format says
  // which restores can mount it.
  const base = snapshot.delta?.kind === "overlay-upper" ? (await readOverlayChain(d, snapshot)).image : null;
  const fits = restoresForSnapshot(snapshot, base?.format);
  // Default: the recommended path (the sandbox fetches over a presigned URL, piped into the extractor).
  const strategy = body.strategy ?? defaultRestore(fits)?.name;
  const kindOf = snapshot.delta ? `${snapshot.delta.kind} delta` : `${formatName(snapshot.format)} snapshot`;
  if (!strategy || !fits.some((s) => s.name === strategy)) {
    throw new SnapflowError("bad_request", `strategy: ${body.strategy} cannot restore a ${kindOf}; use one of: ${fits.map((s) => s.name).join(", ")}`, { field: "strategy" });
  }
  const params: RestoreParams = { restoreId: id, ...body, strategy, startedAt: arrived, leasedByRequest: true };
  // A target that holds files without `replace` is refused here (409); the Workflow checks again before writing.
  await startRunUnderLease(env, d, "restore", id, { sandboxId: params.sandboxId, path: params.path }, params, async () => {
    await refuseNonEmptyTarget(new AgentClient(d.transport, body.sandboxId), body.path, body.replace);
    await lease;
  });
  return json({ id, status: "queued", strategy, snapshotId: body.snapshotId }, 202, { location: `/api/restores/${id}` });
}
