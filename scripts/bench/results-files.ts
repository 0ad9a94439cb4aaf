// Where a benchmark's results go. results/<name>.{json,md,svg} is the current run of that benchmark, the one
// results/README.md names; the run it replaces first moves to results/archive/<its date>-<name>.*, so the index
// never points at a stale file and every iteration stays readable. The date is the replaced run's own (its JSON's
// date, startedAt or summary.updatedAt), else the day its file was written.
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, statSync } from "node:fs";
import { join } from "node:path";

const EXTENSIONS = [".json", ".md", ".svg"];

function dateOf(json: string): string {
  try {
    const r = JSON.parse(readFileSync(json, "utf8")) as { date?: string; startedAt?: string; summary?: { updatedAt?: string } };
    const when = r.date ?? r.startedAt ?? r.summary?.updatedAt;
    if (when && /^\d{4}-\d{2}-\d{2}/.test(when)) return when.slice(0, 10);
  } catch {
    // not ours, or unreadable: the file's own date
  }
  return statSync(json).mtime.toISOString().slice(0, 10);
}

/** The stem to write the new run at (`dir/name`), after moving the current run's files into `dir/archive/`. */
export function currentResultsStem(dir: string, name: string): string {
  mkdirSync(dir, { recursive: true });
  const current = EXTENSIONS.map((ext) => join(dir, `${name}${ext}`)).filter((f) => existsSync(f));
  if (current.length) {
    const archive = join(dir, "archive");
    mkdirSync(archive, { recursive: true });
    const json = join(dir, `${name}.json`);
    const base = `${existsSync(json) ? dateOf(json) : statSync(current[0]!).mtime.toISOString().slice(0, 10)}-${name}`;
    // A second run on one day keeps the first: -2, -3, …
    const taken = new Set(readdirSync(archive));
    let stem = base;
    for (let n = 2; EXTENSIONS.some((ext) => taken.has(`${stem}${ext}`)); n++) stem = `${base}-${n}`;
    for (const f of current) renameSync(f, join(archive, `${stem}${f.slice(f.lastIndexOf("."))}`));
  }
  return join(dir, name);
}
