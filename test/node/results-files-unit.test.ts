// results/<name>.* is the current run of a benchmark; a new run moves it to results/archive/<its date>-<name>.*
// first (scripts/bench/results-files.ts), so the index's names stay current and no iteration is lost.
import { existsSync, mkdtempSync, readdirSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import { currentResultsStem } from "../../scripts/bench/results-files.ts";

const dirs: string[] = [];
afterEach(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));
const fresh = () => {
  const d = mkdtempSync(join(tmpdir(), "results-"));
  dirs.push(d);
  return d;
};

it("the first run of a benchmark is written as results/<name>, nothing archived", () => {
  const dir = fresh();
  expect(currentResultsStem(dir, "peers")).toBe(join(dir, "peers"));
  expect(existsSync(join(dir, "archive"))).toBe(false);
});

it("a new run moves the current one's files to archive/<its date>-<name>, keeping two runs of one day apart", () => {
  const dir = fresh();
  writeFileSync(join(dir, "forks.json"), JSON.stringify({ date: "2026-11-20", datasets: [] }));
  writeFileSync(join(dir, "forks.md"), "# forks");
  expect(currentResultsStem(dir, "forks")).toBe(join(dir, "forks"));
  expect(readdirSync(join(dir, "archive")).sort()).toEqual(["2026-11-20-forks.json", "2026-11-20-forks.md"]);
  expect(existsSync(join(dir, "forks.json"))).toBe(false);
  // The same day again: -2, not over the first.
  writeFileSync(join(dir, "forks.json"), JSON.stringify({ date: "2026-11-20" }));
  currentResultsStem(dir, "forks");
  expect(readdirSync(join(dir, "archive")).sort()).toEqual(["2026-11-20-forks-2.json", "2026-11-20-forks.json", "2026-11-20-forks.md"]);
  // A matrix's date is its summary's; a file with no date in it takes its own mtime's.
  writeFileSync(join(dir, "seeds.json"), JSON.stringify({ summary: { updatedAt: "2026-11-22T10:00:00Z" } }));
  writeFileSync(join(dir, "load.md"), "# load");
  utimesSync(join(dir, "load.md"), new Date("2026-11-21T12:00:00Z"), new Date("2026-11-21T12:00:00Z"));
  currentResultsStem(dir, "seeds");
  currentResultsStem(dir, "load");
  expect(readdirSync(join(dir, "archive"))).toEqual(expect.arrayContaining(["2026-11-22-seeds.json", "2026-11-21-load.md"]));
});
