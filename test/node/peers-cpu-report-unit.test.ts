// The peers race's results show CPU-seconds per process beside wall time, and judge issue 23's two CPU targets:
// the stack's CPU-seconds per default backup over the floor's with the store, and the Worker's CPU-seconds per GB of
// archive — both without what the race's own status polls cost the Worker. Older results files have no CPU figures:
// they still render, with dashes.
import { expect, it } from "vitest";
import { ratios, type CpuSeconds, type DatasetResult, type PeerRow, type Sample } from "../../scripts/bench/peers/model.ts";
import { peersMarkdown } from "../../scripts/bench/peers/report.ts";

const cpu = (worker: number, total: number): CpuSeconds => ({ agent: 1, engine: 2, worker, wrangler: 0.2, store: 1, commands: 0, total });
const row = (id: string, samples: Sample[]): PeerRow => ({ id, label: id, who: id.startsWith("floor") ? "floor" : "snapflow", command: "…", samples });
const dataset = (rows: PeerRow[]): DatasetResult => ({ name: "t", description: "", entries: 1, bytes: 1, diskBytes: 1, rows, errors: [] });

it("the CPU ratios use each row's median total, and the Worker's CPU over the archive's GB per run, the race's polls left out", () => {
  // 20 polls at 5 ms of Worker and 1 ms of wrangler each: 0.1 s of Worker and 0.02 s of wrangler that are the race's, not the backup's
  const polling = { polls: 20, calibrationPolls: 10, workerPerPoll: 0.005, wranglerPerPoll: 0.001 };
  const d = dataset([
    row("floor-store", [{ ms: 3000, cpu: cpu(0, 4) }, { ms: 3100, cpu: cpu(0, 5) }, { ms: 2900, cpu: cpu(0, 6) }]),
    // 0.1 GB archives: 1.1, 3.1 and 2.1 CPU-s of Worker less 0.1 s of polls → 10, 30 and 20 CPU-s per GB
    row("snapflow-backup", [
      { ms: 5000, archiveBytes: 1e8, cpu: cpu(1.1, 9.1), polling },
      { ms: 6000, archiveBytes: 1e8, cpu: cpu(3.1, 11.1), polling },
      { ms: 4000, archiveBytes: 1e8, cpu: cpu(2.1, 10.1), polling },
    ]),
  ]);
  const byName = Object.fromEntries(ratios(d).map((r) => [r.name, r]));
  // totals as measured: 1 + 2 + 1.1 + 1 = 5.1, 7.1, 6.1; less 0.1 of polls: 5, 7, 6 → median 6 over the floor's 5
  expect(byName["stack CPU-seconds per default backup / the floor's with the store (issue 23)"]!.value).toBeCloseTo(6 / 5, 9);
  expect(byName["stack CPU-seconds per default backup / the floor's with the store (issue 23)"]!.met).toBe(false);
  expect(byName["Worker CPU-seconds per GB of archive, default backup (issue 23)"]!.value).toBeCloseTo(20, 9);
  expect(byName["snapflow default backup / floor with store (issue 23)"]!.value).toBeCloseTo(5000 / 3000, 9);
  const md = peersMarkdown({ name: "t", date: "2026-11-26", machine: "m", runs: 3, change: { bytes: 0, seed: 1, description: "" }, datasets: [d] }, "t.svg");
  expect(md).toContain("| operation | n | median s | min s | max s | seen, median s | agent | engine | Worker | polls (Worker, est.) | wrangler | store | commands | total CPU-s |");
  expect(md).toContain("| snapflow-backup | 3 | 5.00 | 4.00 | 6.00 |  | 1.00 | 2.00 | 2.00 | 0.10 | 0.18 | 1.00 | 0.00 | 6.00 |");
  expect(md).toContain("| floor-store | 3 | 3.00 | 2.90 | 3.10 |  | 1.00 | 2.00 | 0.00 | — | 0.20 | 1.00 | 0.00 | 5.00 |");
  expect(md).toContain("| Worker CPU-seconds per GB of archive, default backup (issue 23) | 20.00 CPU-s/GB | ≤ 0.5 CPU-s/GB | **missed** |");
});

it("a results file from before the CPU columns renders them as dashes and says why its CPU ratios have no value", () => {
  const d = dataset([row("floor-store", [{ ms: 3000 }]), row("snapflow-backup", [{ ms: 5000 }])]);
  const cpuRatio = ratios(d).find((r) => r.figure === "cpu")!;
  expect(cpuRatio.value).toBeUndefined();
  expect(cpuRatio.missing).toBe("snapflow-backup not measured (CPU)");
  const md = peersMarkdown({ name: "t", date: "2026-11-25", machine: "m", runs: 1, change: { bytes: 0, seed: 1, description: "" }, datasets: [d] }, "t.svg");
  expect(md).toContain("| snapflow-backup | 1 | 5.00 | 5.00 | 5.00 |  | — | — | — | — | — | — | — | — |");
});

it("a snapflow run is timed to its recorded end; the poll that saw it complete is the seen column", () => {
  // ms: POST → the run's recorded end; polledMs: POST → the first 100-ms poll that saw it complete
  const timed = (ms: number, polledMs: number): Sample => ({ ms, detail: { polledMs } });
  const d = dataset([row("floor-store", [{ ms: 500 }]), row("snapflow-mount-restore", [timed(470, 520), timed(450, 530), timed(490, 560)])]);
  const md = peersMarkdown({ name: "t", date: "2026-11-28", machine: "m", runs: 3, change: { bytes: 0, seed: 1, description: "" }, datasets: [d] }, "t.svg");
  expect(md).toContain("| snapflow-mount-restore | 3 | 0.47 | 0.45 | 0.49 | 0.53 |");
  expect(md).toContain("the run's recorded end");
  expect(ratios(d).find((r) => r.name.startsWith("snapflow fastest mount restore"))!.value).toBeCloseTo(0.47, 9);
});

it("the file-level backup of a restored tree is judged on what it added to the store, against 11 MB", () => {
  const stored = (mb: number): Sample => ({ ms: 900, detail: { storedBytes: mb * 1e6 } });
  const d = dataset([row("snapflow-files-elsewhere", [stored(23.8), stored(10.5), stored(24.1)])]);
  const r = ratios(d).find((x) => x.figure === "stored-mb")!;
  expect(r.value).toBeCloseTo(23.8, 9);
  expect(r.met).toBe(false);
  const md = peersMarkdown({ name: "t", date: "2026-11-27", machine: "m", runs: 3, change: { bytes: 0, seed: 1, description: "" }, datasets: [d] }, "t.svg");
  expect(md).toContain("MB stored (pack, index, manifest if stored) (issue 24) | 23.80 MB | ≤ 11 MB | **missed** |");
});
