// What the load run watches on this host: the resident memory and open file descriptors of the stack's workerd
// processes and of its agent, and the mounts under this project (restores' images and overlays). One reading is
// one sample; a leak shows as memory rising through a steady workload, or counts not back to their start.
import { readdirSync, readFileSync } from "node:fs";
import { processTree, rssBytes } from "../rss.ts";

export interface StackPids {
  /** wrangler dev, whose descendants named workerd run the Worker */
  wranglerPid: number;
  agentPid: number;
}

export interface ResourceSample {
  /** ms since the load run started */
  t: number;
  phase: string;
  workerdRss: number;
  agentRss: number;
  workerdFds: number;
  agentFds: number;
  mounts: number;
}

export const workerdPids = (p: StackPids) => processTree(p.wranglerPid, "workerd");

export function fdCount(pids: number[]): number {
  let n = 0;
  for (const pid of pids) {
    try {
      n += readdirSync(`/proc/${pid}/fd`).length;
    } catch {
      // exited between listing and reading
    }
  }
  return n;
}

/** Mount points under `root` (this project's sandboxes): what a restore mounted and nothing unmounted yet. */
export function mountsUnder(root: string): string[] {
  return readFileSync("/proc/mounts", "utf8").split("\n")
    .map((line) => line.split(" ")[1]?.replace(/\\040/g, " ") ?? "")
    .filter((point) => point.startsWith(root));
}

export function sampleResources(p: StackPids, root: string, t: number, phase: string): ResourceSample {
  const workerd = workerdPids(p);
  return {
    t, phase,
    workerdRss: rssBytes(workerd), agentRss: rssBytes([p.agentPid]),
    workerdFds: fdCount(workerd), agentFds: fdCount([p.agentPid]),
    mounts: mountsUnder(root).length,
  };
}
