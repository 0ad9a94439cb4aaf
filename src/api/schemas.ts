// Everything that crosses the API, as zod schemas.
import { z } from "zod";
import { DatasetBody, MAX_OVERLAY_CHAIN, SANDBOX_ID, SandboxPath, SelectionSpec } from "../../container/contract/protocol.ts";
import { AGENT_AREA } from "../../container/contract/sandbox-layout.ts";
import { Duration, Labels, SnapshotName } from "../snapshots/snapshot-meta.ts";
import { DEFAULT_TENANT, Tenant } from "../snapshots/tenant.ts";
import { DEFAULT_BACKUP, findBackup, STRATEGIES } from "../strategies/registry.ts";

/**
 * A path a caller may name: a sandbox path outside /snapflow, which is the agent's own staging, image and overlay
 * area (a restore into it could replace a mounted image's backing file or another run's staged archive).
 */
export const UserPath = SandboxPath.refine((p) => p !== AGENT_AREA && !p.startsWith(`${AGENT_AREA}/`), {
  message: `is snapflow's own area (${AGENT_AREA}); name a path under /workspace`,
});

const names = (kind: "backup" | "restore") => STRATEGIES.filter((s) => s.kind === kind).map((s) => s.name) as [string, ...string[]];
const strategyOf = (kind: "backup" | "restore") =>
  z.string().refine((n) => names(kind).includes(n), { message: `unknown ${kind} strategy; one of: ${names(kind).join(", ")}` });

/** Multipart knobs for the streaming and presigned multipart paths. */
export const Tuning = z.object({
  partSizeMiB: z.number().int().min(5, "R2 parts are at least 5 MiB").max(5 * 1024).optional(),
  concurrency: z.number().int().min(1).max(16).optional(),
  /** presigned multipart: every part URL expires this many seconds after signing, instead of the fitted expiry (tests) */
  partUrlExpirySeconds: z.number().int().min(1).max(7 * 24 * 3600).optional(),
}).strict();

export const RUN_ID = z.string().regex(/^[a-z]{2}-\d{14}-[0-9a-f]{8}$/, "not a snapflow run id");

/**
 * The tenant a run is for: set by the API caller (the platform, which knows whose sandbox it is), never by the sandbox.
 * Its chunks are deduplicated only against its own (chunks/chunk-keys.ts); "default" is every deployment's first one.
 */
const TenantField = Tenant.default(DEFAULT_TENANT);

export const BackupRequest = z.object({
  tenant: TenantField,
  sandboxId: SANDBOX_ID,
  path: UserPath.default("/workspace"),
  strategy: strategyOf("backup").default(DEFAULT_BACKUP),
  /** delta strategies: the snapshot the delta is taken against */
  baseSnapshotId: RUN_ID.optional(),
  /** overlay-delta: compact the chain in the background once it lies this many deltas over its image or compaction (default 4, or 8 MiB of deltas: compaction-params.ts) */
  compactAfter: z.number().int().min(1).max(MAX_OVERLAY_CHAIN).optional(),
  /** drop the sandbox's page cache before the run (cold-cache measurement), when permitted */
  dropCaches: z.boolean().default(false),
  tuning: Tuning.optional(),
  name: SnapshotName.optional(),
  labels: Labels.optional(),
  /** time to live: seconds or "3d"; the cron trigger deletes the snapshot after it (default: kept until deleted) */
  ttl: Duration.optional(),
  /** what to leave out (container/archive/selection.ts): glob patterns, git's ignore rules, CACHEDIR.TAG directories */
  excludes: SelectionSpec.shape.excludes,
  gitignore: SelectionSpec.shape.gitignore,
  excludeCaches: SelectionSpec.shape.excludeCaches,
  /** an image snapshot's content checked against its manifest once, in a sandbox of its own, right after the backup */
  contentCheck: z.enum(["background", "off"]).optional(),
}).strict().superRefine((b, ctx) => {
  // An overlay delta is the upper layer over a base image that holds everything: leaving paths out of the layer
  // would not leave them out of the restored workspace. Select when backing up the base.
  if (findBackup(b.strategy)?.delta === "overlay-upper" && (b.excludes.length || b.gitignore || b.excludeCaches)) {
    ctx.addIssue({ code: "custom", path: ["excludes"], message: `${b.strategy} archives an overlay's upper layer; excludes, gitignore and excludeCaches apply to the base backup` });
  }
});

export const RestoreRequest = z.object({
  snapshotId: RUN_ID,
  /** must be the snapshot's own tenant (a restore for another is answered as for a snapshot that does not exist) */
  tenant: TenantField,
  sandboxId: SANDBOX_ID,
  path: UserPath.default("/workspace"),
  /** default: the presigned pipe restore for the snapshot's format (else the pushed pipe) */
  strategy: strategyOf("restore").optional(),
  replace: z.boolean().default(false),
  /** restore owners and setuid/setgid bits as archived (restore-params.ts); off by default */
  keepOwnership: z.boolean().default(false),
  dropCaches: z.boolean().default(false),
  /** hash every restored file against the manifest in verify (restore-params.ts); on by itself where the image alone is not trusted */
  deepVerify: z.boolean().default(false),
}).strict();

export const DatasetRequest = DatasetBody.extend({ path: UserPath }).strict();
