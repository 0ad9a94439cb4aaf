// Every restore transfer path, by the registry's RestorePath: a missing entry fails to compile.
import type { RestorePath } from "../../strategies/registry.ts";
import { presignedRangedTransfer } from "./presigned-ranged.ts";
import { presignedTransfer } from "./presigned.ts";
import { pushTransfer } from "./push.ts";
import type { RestoreTransfer } from "./restore-transfer.ts";

export const RESTORE_TRANSFERS: Record<RestorePath, RestoreTransfer> = {
  "push-file": pushTransfer(false),
  "push-pipe": pushTransfer(true),
  "presigned-file": presignedTransfer(false),
  "presigned-pipe": presignedTransfer(true),
  "presigned-ranged-file": presignedRangedTransfer(false),
  "presigned-ranged-pipe": presignedRangedTransfer(true),
};

export type { Destination, RestoreTransfer } from "./restore-transfer.ts";
