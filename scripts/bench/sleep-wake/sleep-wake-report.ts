// The sleep-wake bench's results (run-sleep-wake.ts) and their Markdown: per cycle the wake (request → usable,
// first use, request → complete), whether the woken tree was exact, the sleep (wall time, bytes uploaded), the
// chain's depth and the store against the base plus the sum of the changes; then issue 24's targets, met or
// missed, with the measured figure. Pure.
import { stats } from "../../../src/matrix/median.ts";

export interface SleepWakeCycle {
  cycle: number;
  /** POST of the wake → the first-use marker answers at the target (seen from the host), and the Workflow's own usableMs */
  usableSeenMs: number;
  usableMs?: number;
  firstUseMs: number;
  firstUseDoneMs: number;
  /** POST → every chunk of the image local and verified, the restore recorded */
  completeMs: number;
  /** where the time to usable went (first-use.ts toUsable): the transfer step brings the index and every delta */
  toUsable: Record<string, number>;
  /** entries of the woken tree that differed from what slept (0: exact) */
  differences: number;
  /** bytes the cycle's change wrote, and the sum over the cycles so far */
  changedBytes: number;
  changedTotal: number;
  sleepMs: number;
  /** the delta's archive (a rebase: the chunks the store lacked), and its layer manifest */
  uploadedBytes: number;
  manifestBytes: number;
  /** overlay deltas over the chain's image after this sleep (0: the sleep was a whole backup) */
  depth: number;
  rebase: boolean;
  /** everything in the bucket after the sleep */
  storedBytes: number;
}

export interface SleepWakeResults {
  name: string;
  date: string;
  machine: string;
  dataset: string;
  bytes: number;
  entries: number;
  changeBytes: number;
  maxDepth: number;
  firstUse: string;
  base: { ms: number; imageBytes: number; uploadedBytes: number; storedBytes: number };
  cycles: SleepWakeCycle[];
  errors: string[];
  load: { start: number[]; end: number[]; cores: number };
}

const mb = (b: number) => (b / 1e6).toFixed(2);
const s = (ms: number | undefined) => (ms === undefined ? "–" : (ms / 1000).toFixed(2));
const verdict = (ok: boolean) => (ok ? "met" : "**missed**");

export function sleepWakeMarkdown(r: SleepWakeResults): string {
  const c = r.cycles;
  const last = c.at(-1);
  const first = c[0];
  const deltas = c.filter((x) => !x.rebase);
  const worstUploadRatio = Math.max(...deltas.map((x) => (x.uploadedBytes + x.manifestBytes) / x.changedBytes));
  const storeRatio = last ? last.storedBytes / (r.base.storedBytes + last.changedTotal) : NaN;
  const lines = [
    `# sleep-wake: ${r.dataset}, ${c.length} cycles (${r.date})`,
    "",
    `${r.machine}. Load ${r.load.start.map((x) => x.toFixed(2)).join(" ")} → ${r.load.end.map((x) => x.toFixed(2)).join(" ")} on ${r.load.cores} cores. Emulator figures (local R2 stand-in, SeaweedFS on loopback), not production ones.`,
    "",
    `Usable is request → the first-use marker answering at the target, seen from the host; its transfer step brings the image's index and downloads and extracts every delta of the chain (no compaction yet), so it grows with the depth.`,
    "",
    `The tree: ${mb(r.bytes)} MB, ${r.entries} entries; base squashfs-chunked image ${mb(r.base.imageBytes)} MB in ${s(r.base.ms)} s, store after it ${mb(r.base.storedBytes)} MB. Each cycle wakes the latest snapshot (lazy-overlay-restore) in a fresh sandbox, runs \`${r.firstUse}\`, changes ${mb(r.changeBytes)} MB of new files plus an edit, a delete and a directory deleted and made again, and sleeps (overlay-delta). A chain holds at most ${r.maxDepth} deltas: a sleep past it is a whole squashfs-chunked backup (marked *whole*).`,
    "",
    "| cycle | usable (s) | of which transfer (s) | first use (s) | complete (s) | woken tree | sleep (s) | uploaded (MB) | changed (MB) | depth | store (MB) | store ÷ (base + changes) |",
    "| --: | --: | --: | --: | --: | --- | --: | --: | --: | --: | --: | --: |",
    ...c.map((x) => `| ${x.cycle} | ${s(x.usableSeenMs)} | ${s(x.toUsable?.transferMs)} | ${s(x.firstUseMs)} | ${s(x.completeMs)} | ${x.differences ? `**${x.differences} differ**` : "exact"} | ${s(x.sleepMs)} | ${mb(x.uploadedBytes + x.manifestBytes)}${x.rebase ? " *whole*" : ""} | ${mb(x.changedBytes)} | ${x.depth} | ${mb(x.storedBytes)} | ${(x.storedBytes / (r.base.storedBytes + x.changedTotal)).toFixed(3)} |`),
    "",
  ];
  if (first && last) {
    const up = stats(deltas.map((x) => x.uploadedBytes + x.manifestBytes));
    const sleep = stats(deltas.map((x) => x.sleepMs));
    lines.push(
      `Deltas uploaded ${mb(up.min!)}–${mb(up.max!)} MB (median ${mb(up.median!)}); sleeps ${s(sleep.min)}–${s(sleep.max)} s (median ${s(sleep.median)}).`,
      "",
      `## Issue 24's targets, at cycle ${last.cycle}`,
      "",
      "| | measured | target | |",
      "| --- | --: | --: | --- |",
      `| bytes uploaded by a sleep ÷ the cycle's change (worst delta) | ${worstUploadRatio.toFixed(3)} | ≤ 1.1 | ${verdict(worstUploadRatio <= 1.1)} |`,
      `| sleep, cycle ${last.cycle} | ${s(last.sleepMs)} s | ≤ 0.5 s | ${verdict(last.sleepMs <= 500)} |`,
      `| wake, request → usable, cycle ${last.cycle} | ${s(last.usableSeenMs)} s | ≤ 0.2 s | ${verdict(last.usableSeenMs <= 200)} |`,
      `| first use, cycle ${last.cycle} ÷ cycle 1 | ${(last.firstUseMs / first.firstUseMs).toFixed(2)} | ≤ 1.2 | ${verdict(last.firstUseMs / first.firstUseMs <= 1.2)} |`,
      `| store ÷ (base + sum of changes), no compaction or GC | ${storeRatio.toFixed(3)} | ≤ 1.2 | ${verdict(storeRatio <= 1.2)} |`,
      "",
    );
  }
  lines.push(r.errors.length ? `## Errors\n\n${r.errors.map((e) => `- ${e}`).join("\n")}\n` : "No errors: every woken tree equalled what slept (an independent walk, SHA-256 of every file).\n");
  return lines.join("\n");
}
