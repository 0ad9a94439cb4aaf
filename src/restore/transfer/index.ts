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
  // The SDK's restore has a plan of its own (sdk-plan.ts: a copy within the store, then the SDK downloads it).
  "sdk-restore": {
    piped: false,
    bring: () => Promise.reject(new Error("sdk-restore brings no archive through the agent: its plan is sdk-plan.ts")),
  },
};

export type { Destination, RestoreTransfer } from "./restore-transfer.ts";
