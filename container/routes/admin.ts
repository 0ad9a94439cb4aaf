// Routes about the sandbox itself rather than its data: probe what can run here (tools, /dev/fuse, capabilities,
// filesystems), drop the page cache for cold runs, arm test-only faults, and drop a whole sandbox root (host
// mode only, after undoing its mounts).
import { rm } from "node:fs/promises";
import { AgentError } from "../http/agent-error.ts";
import { dropCaches } from "../system/drop-caches.ts";
import { unmountSandbox } from "../mounts/mounts.ts";
import { probe } from "../system/probe.ts";
import { sweepSandbox, SWEEP_OLDER_THAN_MS } from "../system/sweep.ts";
import * as P from "../contract/protocol.ts";
import type { Routes } from "./route.ts";

export const adminRoutes: Routes = {
  "GET /v1/probe": async (c) => probe(c.root.hostRoot),

  "POST /v1/drop-caches": async () => dropCaches(),

  "POST /v1/faults": async (c) => {
    if (!c.agent.options.faults) throw new AgentError("not_found", "fault injection is off (SNAPFLOW_AGENT_FAULTS=1 turns it on)");
    const body = await c.json(P.FaultBody);
    c.agent.faults.arm(`${c.sandboxId} ${body.route}`, body.times, body.action);
    return { armed: body };
  },

  // What dead runs left in this sandbox, older than the bound (default: longer than any run): sweep.ts.
  "POST /v1/sweep": async (c) => {
    const body = await c.json(P.SweepBody);
    return sweepSandbox(c, body.olderThanSeconds === undefined ? SWEEP_OLDER_THAN_MS : body.olderThanSeconds * 1000);
  },

  "DELETE /v1/sandbox": async (c) => {
    if (!c.agent.options.sandboxesDir) throw new AgentError("bad_request", "only a host agent serving many sandboxes can drop one");
    // Never delete through a live mount: an overlay's upper, or a read-only image, would be emptied or fail.
    const unmounted = await unmountSandbox(c.agent.mounts, c.sandboxId, c.root.hostRoot);
    await rm(c.root.hostRoot, { recursive: true, force: true });
    return { deleted: c.sandboxId, ...(unmounted.length ? { unmounted } : {}) };
  },
};
