// Samples the stack's resources every second while the load runs, labelled with the phase it is in, and prints a
// progress line every few seconds (the phase's own progress, memory, descriptors, mounts).
import { sampleResources, type ResourceSample, type StackPids } from "./resources.ts";

const MiB = 2 ** 20;

export const describeSample = (s: ResourceSample) =>
  `workerd ${(s.workerdRss / MiB).toFixed(0)} MiB / ${s.workerdFds} fds, agent ${(s.agentRss / MiB).toFixed(0)} MiB / ${s.agentFds} fds, ${s.mounts} mounts`;

export function startSampler(pids: StackPids, root: string, opts: { everyMs?: number; printEveryMs?: number } = {}) {
  const t0 = Date.now();
  const samples: ResourceSample[] = [];
  let phase = "idle";
  let progress = "";
  let lastPrint = 0;
  const take = () => {
    const s = sampleResources(pids, root, Date.now() - t0, phase);
    samples.push(s);
    if (s.t - lastPrint >= (opts.printEveryMs ?? 5000)) {
      lastPrint = s.t;
      console.error(`[${(s.t / 1000).toFixed(0).padStart(4)} s] ${phase}${progress ? `: ${progress}` : ""} — ${describeSample(s)}`);
    }
  };
  const timer = setInterval(take, opts.everyMs ?? 1000);
  return {
    samples,
    /** one sample now, outside the interval (the before and after readings) */
    now: (label: string) => sampleResources(pids, root, Date.now() - t0, label),
    setPhase(name: string) {
      phase = name;
      progress = "";
      lastPrint = -Infinity;
    },
    setProgress: (text: string) => void (progress = text),
    stop: () => clearInterval(timer),
  };
}
