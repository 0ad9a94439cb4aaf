// Everything that crosses the API, as zod schemas.
import { z } from "zod";
import { DatasetBody, SANDBOX_ID, SandboxPath } from "../../container/protocol.ts";
import { DEFAULT_BACKUP, STRATEGIES } from "../strategies/registry.ts";

const names = (kind: "backup" | "restore") => STRATEGIES.filter((s) => s.kind === kind).map((s) => s.name) as [string, ...string[]];
const strategyOf = (kind: "backup" | "restore") =>
  z.string().refine((n) => names(kind).includes(n), { message: `unknown ${kind} strategy; one of: ${names(kind).join(", ")}` });

/** Multipart knobs for the streaming and presigned multipart paths. */
export const Tuning = z.object({
  partSizeMiB: z.number().int().min(5, "R2 parts are at least 5 MiB").max(5 * 1024).optional(),
  concurrency: z.number().int().min(1).max(16).optional(),
}).strict();

export const RUN_ID = z.string().regex(/^[a-z]{2}-\d{14}-[0-9a-f]{8}$/, "not a snapflow run id");

export const BackupRequest = z.object({
  sandboxId: SANDBOX_ID,
  path: SandboxPath.default("/workspace"),
  strategy: strategyOf("backup").default(DEFAULT_BACKUP),
  /** delta strategies: the snapshot the delta is taken against */
  baseSnapshotId: RUN_ID.optional(),
  /** drop the sandbox's page cache before the run (cold-cache measurement), when permitted */
  dropCaches: z.boolean().default(false),
  tuning: Tuning.optional(),
}).strict();

export const RestoreRequest = z.object({
  snapshotId: RUN_ID,
  sandboxId: SANDBOX_ID,
  path: SandboxPath.default("/workspace"),
  /** default: the presigned pipe restore for the snapshot's format (else the pushed pipe) */
  strategy: strategyOf("restore").optional(),
  replace: z.boolean().default(false),
  dropCaches: z.boolean().default(false),
}).strict();

export const DatasetRequest = DatasetBody.extend({ path: SandboxPath }).strict();
