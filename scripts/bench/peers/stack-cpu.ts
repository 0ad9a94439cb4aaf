// CPU-seconds per process for one operation of the peers race (scripts/stack/cpu-seconds.ts does the counting):
//
//   agent     the host agent's own process (Node or Bun, all its threads)
//   engine    everything the agent runs below it: tar, zstd, mksquashfs, snapflow-lazy (live ones by a descendant
//             walk, finished ones through the agent's reaped time), whatever engine the agent spawns next
//   Worker    the workerd processes below wrangler dev (the Worker, Workflows, the local bindings)
//   wrangler  the rest of wrangler dev: its Node process, which does not exist in production
//   store     SeaweedFS (weed mini) and anything below it
//   commands  what the race itself ran and waited for: the floors' pipelines, restic, `sync` (this process's reaped
//             time: the race runs one operation at a time, so nothing else is reaped meanwhile)
//   total     all of them but wrangler: the stack as production runs it, plus the commands. wrangler dev's Node
//             process has no production counterpart and spends 0.02–0.3 s in an operation even while the Worker idles.
//
// A reading is taken after the operation's `sync` and another when it ends; the figures are their differences.
// A part that was restarted in between (its pid changed) has no figure: the dead one's time went elsewhere.
import { procTimes, readProcs, splitByName, treeCharge } from "../../stack/cpu-seconds.ts";
import { CPU_PARTS, TOTAL_PARTS, type CpuPart, type CpuSeconds } from "./model.ts";

export interface StackPids {
  agent: number;
  wrangler: number;
  store: number;
}

interface Reading {
  pids: StackPids;
  parts: Record<CpuPart, number>;
}

function read(pids: StackPids): Reading | undefined {
  const procs = readProcs();
  const agent = treeCharge(procs, pids.agent);
  const wrangler = splitByName(procs, pids.wrangler, "workerd");
  const store = treeCharge(procs, pids.store);
  const self = procTimes(process.pid);
  if (!agent || !wrangler || !store || !self) return undefined;
  return { pids, parts: { agent: agent.own, engine: agent.below, worker: wrangler.named, wrangler: wrangler.rest, store: store.own + store.below, commands: self.reaped } };
}

/** Reads the stack's CPU now; `since()` answers the seconds each part used from then (undefined if a part restarted). */
export function stackCpuMeter(pids: () => StackPids): { since(): CpuSeconds | undefined } {
  const before = read(pids());
  return {
    since() {
      const after = read(pids());
      if (!before || !after || (["agent", "wrangler", "store"] as const).some((k) => before.pids[k] !== after.pids[k])) return undefined;
      const parts = Object.fromEntries(CPU_PARTS.map((k) => [k, round(after.parts[k] - before.parts[k])])) as Record<CpuPart, number>;
      return { ...parts, total: round(TOTAL_PARTS.reduce((s, k) => s + parts[k], 0)) };
    },
  };
}

const round = (s: number) => Math.round(s * 1000) / 1000;
