// Resident memory of local stack processes, sampled while a job runs: the evidence that a byte path streams
// (workerd for paths through the Worker, the agent for presigned paths) rather than buffering archives.
import { readdirSync, readFileSync } from "node:fs";

function readStat(pid: number): { ppid: number; comm: string } | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const comm = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
    const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
    return { ppid, comm };
  } catch {
    return null;
  }
}

/** pid and all its descendants whose command name matches `comm` (all of them when comm is undefined). */
export function processTree(pid: number, comm?: string): number[] {
  const children = new Map<number, number[]>();
  const names = new Map<number, string>();
  for (const entry of readdirSync("/proc")) {
    const p = Number(entry);
    if (!Number.isInteger(p)) continue;
    const s = readStat(p);
    if (!s) continue;
    names.set(p, s.comm);
    children.set(s.ppid, [...(children.get(s.ppid) ?? []), p]);
  }
  const out: number[] = [];
  const walk = (p: number) => {
    if (comm === undefined || names.get(p) === comm) out.push(p);
    for (const c of children.get(p) ?? []) walk(c);
  };
  walk(pid);
  return out;
}

export function rssBytes(pids: number[]): number {
  let total = 0;
  for (const pid of pids) {
    try {
      const kb = readFileSync(`/proc/${pid}/status`, "utf8").match(/^VmRSS:\s+(\d+) kB/m)?.[1];
      total += Number(kb ?? 0) * 1024;
    } catch {
      // exited
    }
  }
  return total;
}

export interface RssSample {
  before: number;
  peak: number;
  after: number;
}

/** Samples the RSS of `pids()` every `everyMs` until stopped. */
export function sampleRss(pids: () => number[], everyMs = 200): { stop(): RssSample } {
  const before = rssBytes(pids());
  let peak = before;
  const timer = setInterval(() => (peak = Math.max(peak, rssBytes(pids()))), everyMs);
  return {
    stop() {
      clearInterval(timer);
      const after = rssBytes(pids());
      return { before, peak: Math.max(peak, after), after };
    },
  };
}
