// The agent's housekeeping: sweeps, and test-only faults.
// Part of the agent's protocol (../protocol.ts re-exports every part): both sides import it.
import { z } from "zod";

/** POST /v1/sweep: remove what runs older than this left (default: sweep.ts SWEEP_OLDER_THAN_MS). */
export const SweepBody = z.object({ olderThanSeconds: z.number().int().min(0).optional() });

export const FaultBody = z.object({
  /** the route the fault applies to, e.g. "POST /v1/archive" */
  route: z.string(),
  /** how many of the next matching requests fail with a 503 (fail), or answer with a lie (lie) */
  times: z.number().int().positive().max(100),
  /** lie: only routes that have a lie to tell use it (POST /v1/upload-multipart: parts other than those hashed are sent) */
  action: z.enum(["fail", "lie"]).default("fail"),
});

/** What the agent answers for a file it wrote or an archive it made. */
