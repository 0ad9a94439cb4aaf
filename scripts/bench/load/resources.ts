// What the load run watches on this host: the resident memory and open file descriptors of the stack's workerd
// processes and of its agent, and the mounts under this project (restores' images and overlays). One reading is
// one sample; a leak shows as memory rising through a steady workload, or counts not back to their start.
//
// workerd's descriptors are counted apart in one respect: the local Workflows engine (miniflare) makes every
// Workflow instance a Durable Object with its own SQLite database (.sqlite, -wal, -shm under
// wrangler-state/v3/workflows/) and keeps it open for the life of the process, so those grow by three per run
// whatever our code does. They are counted (and the instances they belong to) so the rest can be judged alone.
import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import { processTree, rssBytes } from "../../stack/rss.ts";

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
  /** of workerdFds: the local Workflows engine's per-instance SQLite files */
  workerdWorkflowDbFds: number;
  /** Workflow instance databases workerd holds open (the .sqlite files among them) */
  workflowInstancesOpen: number;
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

const WORKFLOW_DB = /\/workflows\/[^/]+\/[^/]+\.sqlite(-wal|-shm)?$/;

/** Of `pids`' descriptors: how many are Workflow instance databases, and how many of those are the .sqlite files. */
export function workflowDbFds(pids: number[]): { fds: number; databases: number } {
  let fds = 0;
  let databases = 0;
  for (const pid of pids) {
    let entries: string[] = [];
    try {
      entries = readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue;
    }
    for (const fd of entries) {
      let target = "";
      try {
        target = readlinkSync(`/proc/${pid}/fd/${fd}`);
      } catch {
        continue; // closed meanwhile
      }
      const m = WORKFLOW_DB.exec(target);
      if (!m) continue;
      fds++;
      if (!m[1]) databases++;
    }
  }
  return { fds, databases };
}

/** Mount points under `root` (this project's sandboxes): what a restore mounted and nothing unmounted yet. */
export function mountsUnder(root: string): string[] {
  return readFileSync("/proc/mounts", "utf8").split("\n")
    .map((line) => line.split(" ")[1]?.replace(/\\040/g, " ") ?? "")
    .filter((point) => point.startsWith(root));
}

export function sampleResources(p: StackPids, root: string, t: number, phase: string): ResourceSample {
  const workerd = workerdPids(p);
  const dbs = workflowDbFds(workerd);
  return {
    t, phase,
    workerdRss: rssBytes(workerd), agentRss: rssBytes([p.agentPid]),
    workerdFds: fdCount(workerd), workerdWorkflowDbFds: dbs.fds, workflowInstancesOpen: dbs.databases, agentFds: fdCount([p.agentPid]),
    mounts: mountsUnder(root).length,
  };
}
