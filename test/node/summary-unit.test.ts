// The aggregator's math (src/matrix/median.ts, summary.ts): medians for odd and even n, min/max, failures kept with
// their errors and left out of the timings, MB/s from the median transfer, and the Markdown table.
import { describe, expect, it } from "vitest";
import { median, stats } from "../../src/matrix/median.ts";
import { buildSummary, summaryMarkdown, type RunResult } from "../../src/matrix/summary.ts";

describe("median", () => {
  it("is the middle value for odd n and the mean of the two middle values for even n, whatever the order", () => {
    expect(median([5, 1, 3])).toBe(3);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(median([7])).toBe(7);
    expect(median([])).toBeUndefined();
    expect(stats([3, 9, 1, 4])).toEqual({ n: 4, median: 3.5, min: 1, max: 9 });
  });
});

const cell = { index: 0, dataset: "d", backup: "tar-zst-pipe", restore: "presigned-tar-zst-pipe" };
const ok = (run: number, backupMs: number, transferMs: number, restoreMs: number): RunResult => ({
  matrixId: "m", runKey: `m-c0-r${run}`, cell, run, ok: true, sandboxStartMs: 100 * run, finishedAt: "",
  backup: { steps: { transfer: { ms: transferMs, bytes: 50e6 } }, totalMs: backupMs, archiveBytes: 50e6 },
  restore: { steps: { transfer: { ms: transferMs / 2, bytes: 50e6 } }, totalMs: restoreMs },
});

describe("buildSummary", () => {
  it("takes medians over the successful runs only, and lists the failures with their errors", () => {
    const runs = [ok(1, 3000, 1000, 900), ok(2, 1000, 500, 700), { ...ok(3, 99_999, 99_999, 99_999), ok: false, error: "injected fault" }, ok(4, 2000, 2000, 800)];
    const s = buildSummary("m", "name", [cell], 4, runs);
    expect(s).toMatchObject({ total: 4, done: 4, failed: 1 });
    const [row] = s.rows;
    expect(row!.n).toBe(3);
    expect(row!.phases["backup.total"]).toEqual({ n: 3, median: 2000, min: 1000, max: 3000 });
    expect(row!.phases["restore.total"]).toEqual({ n: 3, median: 800, min: 700, max: 900 });
    expect(row!.phases["sandbox.start"]!.median).toBe(200);
    expect(row!.failures).toEqual([{ run: 3, error: "injected fault" }]);
    // 50 MB over the median backup transfer of 1000 ms.
    expect(row!.backupMBps).toBe(50);
    expect(summaryMarkdown(s)).toContain("| d | tar-zst-pipe | presigned-tar-zst-pipe | 3 | 50.0 | 2.00 s (1.00 s–3.00 s) |");
  });

  it("an even number of runs gives the mean of the middle two", () => {
    const s = buildSummary("m", "name", [cell], 2, [ok(1, 1000, 100, 100), ok(2, 2000, 100, 100)]);
    expect(s.rows[0]!.phases["backup.total"]!.median).toBe(1500);
  });
});
