// A benchmark matrix: datasets × backup presets × restore presets × runs. Restores are paired only with backups
// whose snapshots they can read; a cell is one such (dataset, backup, restore) triple.
import { z } from "zod";
import { DatasetBody } from "../../container/contract/protocol.ts";
import { findBackup, findRestore, restoresFor } from "../strategies/registry.ts";

export const DatasetSpec = DatasetBody.omit({ path: true, replace: true }).extend({ name: z.string().regex(/^[a-z0-9][a-z0-9-]{0,40}$/, "a dataset name is 1–41 of a-z, 0-9 and '-'") });
export type DatasetSpec = z.infer<typeof DatasetSpec>;

/** A preset a matrix can run: any restore, or a backup that makes full snapshots (deltas need a base). */
const isFull = { backup: (n: string) => findBackup(n) !== undefined && !findBackup(n)!.delta, restore: (n: string) => findRestore(n) !== undefined };
const preset = (kind: "backup" | "restore") => z.string().refine(isFull[kind], { message: `not a full ${kind} preset (see GET /api/strategies)` });

export const MatrixSpec = z.object({
  name: z.string().regex(/^[a-z0-9][a-z0-9-]{0,40}$/, "a matrix name is 1–41 of a-z, 0-9 and '-'"),
  datasets: z.array(DatasetSpec).min(1).max(20),
  backups: z.array(preset("backup")).min(1).max(100),
  /** restore presets to pair with each backup; default: every restore that reads the backup's format */
  restores: z.array(preset("restore")).max(100).optional(),
  /** explicit (backup, restore) cells instead of the cross product; each backup must appear in `backups` */
  pairs: z.array(z.object({ backup: preset("backup"), restore: preset("restore") }).strict()).max(200).optional(),
  runs: z.number().int().min(1).max(20).default(3),
  /** a fresh sandbox for every run (the seeds' isolated=true), else one sandbox per cell */
  isolated: z.boolean().default(true),
  dropCaches: z.boolean().default(true),
  /** runs in flight at once; 1 keeps runs from competing for the machine (timings stay comparable) */
  concurrency: z.number().int().min(1).max(50).default(1),
}).strict().superRefine((spec, ctx) => {
  spec.pairs?.forEach((pair, i) => {
    const b = findBackup(pair.backup);
    if (!spec.backups.includes(pair.backup)) ctx.addIssue({ code: "custom", path: ["pairs", i, "backup"], message: `${pair.backup} is not in backups` });
    if (b && !restoresFor(b.format).some((r) => r.name === pair.restore)) ctx.addIssue({ code: "custom", path: ["pairs", i, "restore"], message: `${pair.restore} cannot restore what ${pair.backup} makes` });
  });
});
export type MatrixSpec = z.infer<typeof MatrixSpec>;

export interface Cell {
  index: number;
  dataset: string;
  backup: string;
  restore: string;
}

/** The cells of a matrix, in a stable order; a backup with no restore among `restores` gets none. */
export function cellsOf(spec: MatrixSpec): Cell[] {
  const cells: Cell[] = [];
  for (const dataset of spec.datasets) {
    if (spec.pairs) {
      for (const pair of spec.pairs) cells.push({ index: cells.length, dataset: dataset.name, ...pair });
      continue;
    }
    for (const b of spec.backups) {
      // The schema admitted only backup presets.
      const fits = restoresFor(findBackup(b)!.format).filter((r) => !spec.restores || spec.restores.includes(r.name));
      for (const r of fits) cells.push({ index: cells.length, dataset: dataset.name, backup: b, restore: r.name });
    }
  }
  return cells;
}

/** Every run of a matrix in the order they are sent: cell by cell, run by run. */
export function runsOf(spec: MatrixSpec, cells: Cell[]): { cell: Cell; run: number }[] {
  return cells.flatMap((cell) => Array.from({ length: spec.runs }, (_, i) => ({ cell, run: i + 1 })));
}

/** The key of one run, also its Workflow instance id: the same message always names the same instance. */
export const runKey = (matrixId: string, cell: Pick<Cell, "index">, run: number) => `${matrixId}-c${cell.index}-r${run}`;

/** The sandbox holding dataset i of a matrix whose runs go one at a time; the aggregator ends it with the matrix. */
export const sharedSource = (matrixId: string, datasetIndex: number) => `${matrixId}-d${datasetIndex}`;
