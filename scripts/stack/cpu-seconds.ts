// CPU-seconds of host processes, from /proc/<pid>/stat: what a benchmark bills to each part of the local stack.
// On a shared 2-core machine wall time swings with whatever else runs; the CPU a process tree used does not.
//
// A tree's charge at one moment is, over every process alive in it, its own time (utime + stime: all its threads)
// plus what it has reaped (cutime + cstime: each child it waited for, with that child's own reaped descendants, as
// the kernel adds them up at wait()). The difference of two such charges is exact for everything that ran in the tree
// between them: a child that lived and died in between (tar under the agent) is in its parent's cutime once reaped; a
// long-lived one (a FUSE helper) is in its own times while it lives; a child alive at the first reading and reaped by
// the second moves from its own times to its parent's, counted once. What leaves the tree is not counted: a daemon
// that forks into the background (reparented to init), or a child reaped by a process outside the tree. Kernel
// threads (writeback, kworkers) belong to no tree. The unit is the clock tick (`getconf CLK_TCK`, 100 Hz here):
// each process's figure is rounded to 10 ms.
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";

export interface ProcTimes {
  ppid: number;
  comm: string;
  /** utime + stime, seconds: the process's own threads */
  own: number;
  /** cutime + cstime, seconds: the children it has waited for, with what they had reaped */
  reaped: number;
}

let ticks: number | undefined;
/** Clock ticks per second, as /proc counts them. */
export function clockTicks(): number {
  return (ticks ??= Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100);
}

/** One process's times, or undefined when it is gone. */
export function procTimes(pid: number): ProcTimes | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
  // comm may hold spaces and parentheses: it ends at the last ")".
  const close = stat.lastIndexOf(")");
  const f = stat.slice(close + 2).split(" ");
  const t = clockTicks();
  return { ppid: Number(f[1]), comm: stat.slice(stat.indexOf("(") + 1, close), own: (Number(f[11]) + Number(f[12])) / t, reaped: (Number(f[13]) + Number(f[14])) / t };
}

/** Every process's times at one moment, by pid. */
export function readProcs(): Map<number, ProcTimes> {
  const out = new Map<number, ProcTimes>();
  for (const e of readdirSync("/proc")) {
    if (!/^\d+$/.test(e)) continue;
    const p = procTimes(Number(e));
    if (p) out.set(Number(e), p);
  }
  return out;
}

/** `root`'s live descendants in `procs` (not root itself). */
export function descendants(procs: Map<number, ProcTimes>, root: number): number[] {
  const children = new Map<number, number[]>();
  for (const [pid, p] of procs) children.set(p.ppid, [...(children.get(p.ppid) ?? []), pid]);
  const out: number[] = [];
  const walk = (p: number) => {
    for (const c of children.get(p) ?? []) {
      out.push(c);
      walk(c);
    }
  };
  walk(root);
  return out;
}

/** What a set of processes is charged: each one's own time plus what it reaped. */
export const charged = (procs: Map<number, ProcTimes>, pids: number[]) => pids.reduce((s, pid) => s + (procs.get(pid) ? procs.get(pid)!.own + procs.get(pid)!.reaped : 0), 0);

export interface TreeCharge {
  /** root's own threads */
  own: number;
  /** everything below root: what root reaped, and each live descendant's own and reaped time */
  below: number;
}

/** A tree's charge at the moment `procs` was read; undefined when root is not alive in it. */
export function treeCharge(procs: Map<number, ProcTimes>, root: number): TreeCharge | undefined {
  const r = procs.get(root);
  if (!r) return undefined;
  return { own: r.own, below: r.reaped + charged(procs, descendants(procs, root)) };
}

/**
 * The part of root's tree that runs as processes named `comm` (each with its own descendants), and the rest:
 * workerd below wrangler dev, apart from wrangler's own Node process.
 */
export function splitByName(procs: Map<number, ProcTimes>, root: number, comm: string): { named: number; rest: number } | undefined {
  const tree = treeCharge(procs, root);
  if (!tree) return undefined;
  const tops = [root, ...descendants(procs, root)].filter((pid) => procs.get(pid)!.comm === comm && procs.get(procs.get(pid)!.ppid)?.comm !== comm);
  const named = tops.reduce((s, pid) => s + charged(procs, [pid, ...descendants(procs, pid)]), 0);
  return { named, rest: tree.own + tree.below - named };
}
