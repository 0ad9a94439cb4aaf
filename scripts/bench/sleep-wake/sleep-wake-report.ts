// The sleep-wake bench's results (run-sleep-wake.ts) and their Markdown: per cycle the wake (request → usable,
// first use, request → complete) and the depth it resolved to, whether the woken tree was exact, the sleep (wall
// time, bytes uploaded), the chain's depth as recorded, the compactions that ended, and the store against the base
// plus the sum of the changes; then the compactions, the garbage collection at the end, and issue 24's targets, met
// or missed, with the measured figure. Pure.
import { FILES_MAX_DEPTH } from "../../../container/contract/protocol.ts";
import { stats } from "../../../src/matrix/median.ts";
import type { CompactionRun } from "./compaction-watch.ts";

export interface SleepWakeCycle {
  cycle: number;
  /** POST of the wake → the first-use marker answers at the target (seen from the host), and the Workflow's own usableMs */
  usableSeenMs: number;
  usableMs?: number;
  firstUseMs: number;
  /** the first and last cycles: first use over several wakes of the snapshot, this cycle's first (absent: one) */
  firstUseSamplesMs?: number[];
  firstUseDoneMs: number;
  /** POST → every chunk of the image local and verified, the restore recorded */
  completeMs: number;
  /** where the time to usable went (first-use.ts toUsable): the transfer step brings the index and every delta */
  toUsable: Record<string, number>;
  /** the sleep's steps (ms) */
  sleepSteps?: Record<string, number>;
  /** entries of the woken tree that differed from what slept (0: exact) */
  differences: number;
  /** bytes the cycle's change wrote, and the sum over the cycles so far */
  changedBytes: number;
  changedTotal: number;
  sleepMs: number;
  /** the delta's archive (a rebase: the chunks the store lacked), and its layer manifest */
  uploadedBytes: number;
  manifestBytes: number;
  /** overlay deltas over the chain's image or compaction after this sleep, as recorded (0: the sleep was a whole backup) */
  depth: number;
  /** the deltas the wake laid over its image or the newest compaction (absent: runs from before compaction) */
  resolvedDepth?: number;
  /** the compaction this sleep started, and those that ended during the cycle */
  compactionStarted?: string;
  compactionsEnded?: Pick<CompactionRun, "id" | "delta" | "afterCycle" | "status" | "wallMs" | "uploadedBytes">[];
  /** since the first cycle started */
  atMs?: number;
  rebase: boolean;
  /** everything in the bucket after the sleep */
  storedBytes: number;
}

export interface SleepWakeResults {
  name: string;
  /** the base's backup and the wake over it (absent in runs from before --base: squashfs-chunked, lazy-overlay-restore) */
  baseStrategy?: string;
  /** the sleep's preset (before it was recorded: overlay-delta) */
  sleep?: string;
  wake?: string;
  date: string;
  machine: string;
  dataset: string;
  bytes: number;
  entries: number;
  changeBytes: number;
  maxDepth: number;
  compactAfter?: number;
  firstUse: string;
  base: { ms: number; imageBytes: number; uploadedBytes: number; storedBytes: number };
  cycles: SleepWakeCycle[];
  errors: string[];
  load: { start: number[]; end: number[]; cores: number };
  compactions?: CompactionRun[];
  /** the end: every snapshot the tip does not need deleted, chunks collected, the tip woken again */
  /**
   * After the last cycle, before GC: the snapshot cycle 1 woke and the one the last cycle woke, each woken ALTERNATE
   * more times in fresh sandboxes, first use timed. Both meet the machine as the run left it, so their ratio is the
   * chain's own cost; the cycles' own samples are 47 minutes apart.
   */
  firstUseAlternated?: { early: { cycle: number; snapshotId: string; ms: number[] }; late: { cycle: number; snapshotId: string; ms: number[] } };
  gc?: { storedBefore: number; storedAfter: number; deleted: number; kept: string[]; wake: { usableSeenMs: number; resolvedDepth: number; differences: number } };
}

const mb = (b: number) => (b / 1e6).toFixed(2);
const s = (ms: number | undefined) => (ms === undefined ? "–" : (ms / 1000).toFixed(2));
const verdict = (ok: boolean) => (ok ? "met" : "**missed**");

const minutes = (ms: number) => (ms < 90_000 ? `${Math.round(ms / 1000)} seconds` : `${Math.round(ms / 60_000)} minutes`);

export function sleepWakeMarkdown(r: SleepWakeResults): string {
  const c = r.cycles;
  const last = c.at(-1);
  const first = c[0];
  const deltas = c.filter((x) => !x.rebase);
  const worstUploadRatio = Math.max(...deltas.map((x) => (x.uploadedBytes + x.manifestBytes) / x.changedBytes));
  const storeRatio = last ? last.storedBytes / (r.base.storedBytes + last.changedTotal) : NaN;
  const gcRatio = last && r.gc ? r.gc.storedAfter / (r.base.storedBytes + last.changedTotal) : NaN;
  const compactions = r.compactions ?? [];
  const ended = (x: SleepWakeCycle) => (x.compactionsEnded ?? []).map((e) => `${e.status === "complete" ? "" : `${e.status} `}C${e.afterCycle} ${s(e.wallMs)} s, ${mb(e.uploadedBytes ?? 0)} MB`).join("; ") || "";
  const files = r.baseStrategy === "files-cas";
  const wake = r.wake ?? "lazy-overlay-restore";
  const compactedAs = files
    ? "backed up as files-cas with the chain's base as its parent, reading only the names the chain's deltas hold: the rest keeps the base's chunk lists unread"
    : "backed up whole as squashfs-chunked, its chunks deduplicated";
  const lines = [
    `# sleep-wake: ${r.dataset}, ${files ? "file-level base, " : ""}${c.length} cycles (${r.date})`,
    "",
    `${r.machine}. Load ${r.load.start.map((x) => x.toFixed(2)).join(" ")} → ${r.load.end.map((x) => x.toFixed(2)).join(" ")} on ${r.load.cores} cores. Emulator figures (local R2 stand-in, SeaweedFS on loopback), not production ones.`,
    "",
    r.sleep === "files-cas"
      ? "Usable is request → the first-use marker answering at the target, seen from the host; its transfer step is files-mount fetching the woken snapshot's index chain (a whole index and its layers, at once), composing it and serving the tree. There are no overlay deltas to lay (*woke at depth* 0) and no compactions."
      : `Usable is request → the first-use marker answering at the target, seen from the host; its transfer step brings the ${files ? "base's (or compaction's) file-level index" : "image's (or compaction's) index"} and downloads and extracts each delta laid over it. *Woke at depth* is how many deltas the wake laid: the chain resolved through its newest compaction. A sleep ${r.compactAfter ?? "–"} deltas deep over its image or compaction, or whose deltas there hold 8 MiB, starts a compaction in the background (one at a time per chain) (the tree woken in a compactor sandbox and ${compactedAs}); no cycle waits for it. *Compactions ended* lists those seen ended during the cycle (Ck: started after cycle k's sleep; its wall time and the bytes it uploaded, counted in the store, not in *uploaded*).`,
    "",
    `The tree: ${mb(r.bytes)} MB, ${r.entries} entries; base ${files ? `files-cas, its pack` : "squashfs-chunked image"} ${mb(r.base.imageBytes)} MB in ${s(r.base.ms)} s, store after it ${mb(r.base.storedBytes)} MB. Each cycle wakes the latest snapshot (${wake}) in a fresh sandbox, runs \`${r.firstUse}\`, changes ${mb(r.changeBytes)} MB of new files plus an edit, a delete and a directory deleted and made again, and sleeps (${r.sleep ?? "overlay-delta"}). ${r.sleep === "files-cas" ? `Each sleep is a layer of the woken snapshot's index (what the wake's upper holds); *chain depth* is its layers over a whole index, at most ${FILES_MAX_DEPTH}; the sleep after that lays its layer over the whole index itself (depth 1 again, holding what the layers between changed: filecas layer.go), and none writes the whole index while those layers stay under a quarter of it.` : `A chain holds at most ${r.maxDepth} deltas after its image or newest compaction.`}`,
    "",
    "| cycle | woke at depth | usable (s) | of which transfer (s) | first use (s) | complete (s) | woken tree | sleep (s) | uploaded (MB) | changed (MB) | chain depth | compactions ended | store (MB) | store ÷ (base + changes) |",
    "| --: | --: | --: | --: | --: | --: | --- | --: | --: | --: | --: | --- | --: | --: |",
    ...c.map((x) => `| ${x.cycle} | ${x.resolvedDepth ?? "–"} | ${s(x.usableSeenMs)} | ${s(x.toUsable?.transferMs)} | ${s(x.firstUseMs)} | ${s(x.completeMs)} | ${x.differences ? `**${x.differences} differ**` : "exact"} | ${s(x.sleepMs)} | ${mb(x.uploadedBytes + x.manifestBytes)}${x.rebase ? " *whole*" : ""} | ${mb(x.changedBytes)} | ${x.depth}${x.compactionStarted ? " →C" : ""} | ${ended(x)} | ${mb(x.storedBytes)} | ${(x.storedBytes / (r.base.storedBytes + x.changedTotal)).toFixed(3)} |`),
    "",
  ];
  if (first && last) {
    const up = stats(deltas.map((x) => x.uploadedBytes + x.manifestBytes));
    const sleep = stats(deltas.map((x) => x.sleepMs));
    // First use is one cold command: the first and last cycles sample it over several wakes, and the ratio is of medians.
    const firstUseOf = (x: SleepWakeCycle) => stats(x.firstUseSamplesMs ?? [x.firstUseMs]).median!;
    const firstUseRatio = firstUseOf(last) / firstUseOf(first);
    const alt = r.firstUseAlternated;
    const alternated = alt && alt.early.ms.length && alt.late.ms.length
      ? { early: alt.early.ms, late: alt.late.ms, n: Math.min(alt.early.ms.length, alt.late.ms.length), ratio: stats(alt.late.ms).median! / stats(alt.early.ms).median! }
      : undefined;
    const firstUseSampled = first.firstUseSamplesMs && last.firstUseSamplesMs ? Math.min(first.firstUseSamplesMs.length, last.firstUseSamplesMs.length) : 0;
    const done = compactions.filter((x) => x.status === "complete");
    if (compactions.length) {
      // A compaction whose progress lost its step times (a refused KV write) has no wall time: left out, not 0.
      const wall = stats(done.filter((x) => x.wallMs !== undefined).map((x) => x.wallMs!));
      const upC = stats(done.map((x) => x.uploadedBytes ?? 0));
      lines.push(
        `Compactions: ${compactions.length} started, ${done.length} complete${compactions.length > done.length ? `, ${compactions.length - done.length} not (${compactions.filter((x) => x.status !== "complete").map((x) => `C${x.afterCycle} ${x.status}${x.error ? `: ${x.error}` : ""}`).join("; ")})` : ""}` +
          (done.length ? `; each ${s(wall.min)}–${s(wall.max)} s (median ${s(wall.median)}), uploading ${mb(upC.min!)}–${mb(upC.max!)} MB (median ${mb(upC.median!)})${files ? `, reading ${stats(done.map((x) => x.readFiles ?? 0)).min}–${stats(done.map((x) => x.readFiles ?? 0)).max} files each` : ` of images of ${mb(Math.min(...done.map((x) => x.imageBytes ?? 0)))}–${mb(Math.max(...done.map((x) => x.imageBytes ?? 0)))} MB`}.` : "."),
        "",
      );
      // Where a compaction's time goes: the median of each step over the complete ones.
      const names = [...new Set(done.flatMap((x) => Object.keys(x.steps ?? {})))];
      if (names.length) lines.push(`A compaction's steps (median s): ${names.map((n) => `${n} ${s(stats(done.flatMap((x) => x.steps?.[n] ?? [])).median)}`).join(", ")}.`, "");
      const inside = (pick: (x: CompactionRun) => number | undefined) => s(stats(done.flatMap((x) => pick(x) ?? [])).median);
      if (done.some((x) => x.engineMs !== undefined)) lines.push(`Inside them (median s): the engine's pass ${inside((x) => x.engineMs)} (its walk ${inside((x) => x.walkMs)}), the agent's comparison of the manifests ${inside((x) => x.checkAgentMs)}.`, "");
    }
    if (r.gc) {
      lines.push(
        `Garbage collection at the end: ${r.gc.deleted} snapshots the tip does not need deleted (kept: ${r.gc.kept.join(", ")}), unreferenced chunks collected: store ${mb(r.gc.storedBefore)} → ${mb(r.gc.storedAfter)} MB. The tip woke again after it at depth ${r.gc.wake.resolvedDepth}, usable in ${s(r.gc.wake.usableSeenMs)} s, ${r.gc.wake.differences ? `**${r.gc.wake.differences} entries differed**` : "exact"}.`,
        "",
      );
    }
    lines.push(
      `Deltas uploaded ${mb(up.min!)}–${mb(up.max!)} MB (median ${mb(up.median!)}); sleeps ${s(sleep.min)}–${s(sleep.max)} s (median ${s(sleep.median)}).` +
        (firstUseSampled ? ` First use over ${firstUseSampled} wakes of the same snapshot: cycle 1 ${first.firstUseSamplesMs!.map((x) => s(x)).join(", ")} s, cycle ${last.cycle} ${last.firstUseSamplesMs!.map((x) => s(x)).join(", ")} s (the table's is each cycle's first).` : ""),
      ...(alternated
        ? [
            "",
            `First use of the two snapshots woken alternately after cycle ${last.cycle} (the machine as the run left it, for both): cycle 1's ${alternated.early.map((x) => s(x)).join(", ")} s, cycle ${last.cycle}'s ${alternated.late.map((x) => s(x)).join(", ")} s. The cycles' own first uses are${last.atMs !== undefined && first.atMs !== undefined ? ` ${minutes(last.atMs - first.atMs)}` : ""} apart, so their ratio also carries what the run did to the machine meanwhile; the alternated one is the chain's own cost.`,
          ]
        : []),
      "",
      `## Issue 24's targets, at cycle ${last.cycle}`,
      "",
      "| | measured | target | |",
      "| --- | --: | --: | --- |",
      `| bytes uploaded by a sleep ÷ the cycle's change (worst delta) | ${worstUploadRatio.toFixed(3)} | ≤ 1.1 | ${verdict(worstUploadRatio <= 1.1)} |`,
      `| sleep, cycle ${last.cycle} | ${s(last.sleepMs)} s | ≤ 0.5 s | ${verdict(last.sleepMs <= 500)} |`,
      `| wake, request → usable, cycle ${last.cycle} | ${s(last.usableSeenMs)} s | ≤ 0.2 s | ${verdict(last.usableSeenMs <= 200)} |`,
      ...(alternated
        ? [`| first use, cycle ${last.cycle}'s snapshot ÷ cycle 1's, woken alternately after the last cycle (medians of ${alternated.n} wakes each) | ${alternated.ratio.toFixed(2)} | ≤ 1.2 | ${verdict(alternated.ratio <= 1.2)} |`]
        : []),
      `| first use, cycle ${last.cycle} ÷ cycle 1, each in its own cycle${firstUseSampled ? ` (medians of ${firstUseSampled} wakes each)` : ""} | ${firstUseRatio.toFixed(2)} | ≤ 1.2 | ${verdict(firstUseRatio <= 1.2)} |`,
      `| store ÷ (base + sum of changes), before GC (compactions included) | ${storeRatio.toFixed(3)} | – | |`,
      `| store ÷ (base + sum of changes), after compaction and GC | ${Number.isFinite(gcRatio) ? gcRatio.toFixed(3) : "–"} | ≤ 1.2 | ${Number.isFinite(gcRatio) ? verdict(gcRatio <= 1.2) : "not measured"} |`,
      "",
    );
  }
  lines.push(r.errors.length ? `## Errors\n\n${r.errors.map((e) => `- ${e}`).join("\n")}\n` : "No errors: every woken tree equalled what slept (an independent walk, SHA-256 of every file).\n");
  return lines.join("\n");
}
