// The content check of an image snapshot, taken off every restore's path: right after an image backup is recorded,
// the backup Workflow starts one ordinary restore of it into a fresh sandbox of its own (`chk-…`), which is not the
// source, so it hashes every file against the manifest and records `contentChecked` (content-check.ts), then ends
// that sandbox. Every later restore anywhere trusts the image's SHA-256 and does not walk the tree. A restore that
// comes before the check has finished does the check itself, as before: nothing waits for it, and nothing trusts an
// image on its source sandbox's word alone.
//
// IMAGE_CONTENT_CHECK: "background" (default) or "off" (the first restore outside the source pays the check, as
// before). A backup request can ask either (`contentCheck`). The test projects set "off", so that their many image
// backups do not each start a restore beside the tests; background-check-integration turns it on per request.
import type { Deps } from "../deps.ts";
import { newId } from "../ids.ts";
import { startRunUnderLease } from "../runs/start-run.ts";
import { AgentClient } from "../sandbox/agent-client.ts";
import type { SnapshotRecord } from "../snapshots/records.ts";
import { restoresForSnapshot, unavailableReason, type RestoreStrategy } from "../strategies/registry.ts";
import type { RestoreParams } from "./restore-params.ts";

export type ContentCheckMode = "background" | "off";

/** The mode a backup runs with: its request's, else the deployment's (IMAGE_CONTENT_CHECK), else background. */
export function contentCheckMode(env: object, asked?: ContentCheckMode): ContentCheckMode {
  if (asked) return asked;
  return (env as { IMAGE_CONTENT_CHECK?: unknown }).IMAGE_CONTENT_CHECK === "off" ? "off" : "background";
}

/**
 * Why a recorded snapshot needs no background check, or undefined when it does. A backup asks it of its strategy
 * before it records anything (format and delta are the strategy's too), to skip the step that would start one.
 */
export function noCheckNeeded(record: Pick<SnapshotRecord, "format" | "contentChecked"> & { delta?: unknown }): string | undefined {
  if (record.format.kind === "tar") return "a tar snapshot's content is checked by every restore as it streams";
  if (record.format.kind === "files") return "a file-level snapshot's content is checked by every restore as it is made (its index against the manifest, each chunk and file against the index)";
  if (record.delta) return "a delta's layers are checked by the restore of its chain";
  if (record.contentChecked) return "already checked";
  return undefined;
}

/** The checker's restore: a kernel mount where the sandbox allows it (no extraction to write), else lazy, else any. */
const PREFERENCE: RestoreStrategy["materialize"][] = ["mount-kernel", "lazy", "mount-fuse", "extract"];

/** The sandbox a snapshot's check runs in: its own, fresh (a valid sandbox id: `chk-` + the snapshot id). */
export const checkerSandbox = (snapshotId: string) => `chk-${snapshotId}`;
export const CHECK_PATH = "/workspace/check";

/**
 * Starts the restore that checks `record`'s content (see the file comment); answers what it started, or why not.
 * Never throws for a check that cannot start: the snapshot is good either way, and its first foreign restore checks.
 */
export async function startContentCheck(env: Env, d: Deps, record: SnapshotRecord): Promise<{ restoreId: string; sandboxId: string; strategy: string } | { skipped: string }> {
  const why = noCheckNeeded(record);
  if (why) return { skipped: why };
  const sandboxId = checkerSandbox(record.id);
  const probe = await new AgentClient(d.transport, sandboxId).probe();
  const fits = restoresForSnapshot(record).filter((s) => s.path.startsWith("presigned") && !unavailableReason(s, probe, d.transport.kind));
  const strategy = PREFERENCE.map((m) => fits.find((s) => s.materialize === m)).find((s) => s !== undefined) ?? fits[0];
  if (!strategy) {
    await d.transport.destroy(sandboxId).catch(() => {});
    return { skipped: `no restore of a ${record.format.kind} snapshot can run in sandbox ${sandboxId}` };
  }
  const restoreId = newId("rs");
  const params: RestoreParams = {
    restoreId,
    snapshotId: record.id,
    ...(record.tenant ? { tenant: record.tenant } : {}),
    sandboxId,
    path: CHECK_PATH,
    strategy: strategy.name,
    replace: false,
    endSandbox: true,
    startedAt: new Date().toISOString(),
  };
  await startRunUnderLease(env, d, "restore", restoreId, { sandboxId, path: CHECK_PATH }, params);
  return { restoreId, sandboxId, strategy: strategy.name };
}
