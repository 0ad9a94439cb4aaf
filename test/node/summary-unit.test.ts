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

describe("what the seeds timed, and the comparison with their figures", () => {
  it("backup core is archive less its manifest plus transfer; restore core is transfer plus materialize", async () => {
    const { backupCoreMs, restoreCoreMs } = await import("../../src/matrix/summary.ts");
    const r = {
      ...ok(1, 0, 0, 0),
      backup: { steps: { archive: { ms: 9000, bytes: 0, manifest: { ms: 6000 } }, transfer: { ms: 2500, bytes: 1 } }, totalMs: 12000, archiveBytes: 1 },
      restore: { steps: { transfer: { ms: 1500, bytes: 1 }, materialize: { ms: 40, bytes: 0 }, verify: { ms: 3000, bytes: 0 } }, totalMs: 4600 },
    };
    expect(backupCoreMs(r)).toBe(5500);
    expect(restoreCoreMs(r)).toBe(1540);
  });

  it("sets our core median beside each published figure with the ratio, and names failures", async () => {
    const { seedComparison, seedComparisonMarkdown } = await import("../../src/matrix/seed-comparison.ts");
    const run = (n: number, archiveMs: number) => ({
      ...ok(n, 0, 0, 0),
      cell: { index: 0, dataset: "node-modules", backup: "tar-zst-direct", restore: "presigned-tar-zst-pipe" },
      backup: { steps: { archive: { ms: archiveMs, bytes: 0, manifest: { ms: 1000 } }, transfer: { ms: 1000, bytes: 1 } }, totalMs: archiveMs + 2000, archiveBytes: 1 },
      restore: { steps: { transfer: { ms: 2350, bytes: 1 }, materialize: { ms: 0, bytes: 0 } }, totalMs: 3000 },
    });
    const summary = buildSummary("m", "seeds", [{ index: 0, dataset: "node-modules", backup: "tar-zst-direct", restore: "presigned-tar-zst-pipe" }], 3, [run(1, 3000), run(2, 5000), run(3, 4000)]);
    const rows = seedComparison(summary);
    // tar-zst-direct: median archive 4000 − 1000 manifest + 1000 transfer = 4 s; the seed published 10.9 s and 4.0 s.
    expect(rows.find((r) => r.preset === "tar-zst-direct")).toMatchObject({ phase: "backup", ours: 4, n: 3 });
    expect(rows.find((r) => r.preset === "presigned-tar-zst-pipe")).toMatchObject({ phase: "restore", ours: 2.35 });
    const md = seedComparisonMarkdown(rows);
    expect(md).toContain("| `tar-zst-direct` | backup | 4.00 (3) | 6.00 | 10.9 |");
    expect(md).toMatch(/\| 0\.37 \|\n.*\| 4 \| .* \| 1\.00 \|/);
    expect(md).toContain("| `presigned-tar-zst-pipe` | restore | 2.35 (3) | 3.00 | 4.7 |");
  });
});

describe("where the time goes", () => {
  it("overhead is the wall clock between the first step's start and the last step's end that no phase measured", () => {
    const steps = {
      probe: { ms: 100, bytes: 0, startedAt: 1_000, endedAt: 1_100 },
      // 400 ms between the steps: scheduling, a retried attempt's wait
      transfer: { ms: 1_000, bytes: 5e6, startedAt: 1_500, endedAt: 2_500 },
    };
    const run: RunResult = { ...ok(1, 1_100, 1_000, 500), backup: { steps, totalMs: 1_100, archiveBytes: 5e6 } };
    const [row] = buildSummary("m", "name", [cell], 1, [run]).rows;
    expect(row!.phases["backup.overhead"]!.median).toBe(400);
    // Runs from before steps carried their bounds have no overhead figure rather than a wrong one.
    expect(row!.phases["restore.overhead"]).toBeUndefined();
    const md = summaryMarkdown(buildSummary("m", "name", [cell], 1, [run]));
    expect(md).toContain("| backup probe | backup archive | backup transfer |");
    expect(md).toContain("| d | tar-zst-pipe | presigned-tar-zst-pipe | 0.10 | — | 1.00 | — | — | 0.40 |");
  });
});
