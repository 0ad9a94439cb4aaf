// What a benchmark cell run is asked to do (the BenchmarkCellWorkflow's params).
import type { Cell } from "./matrix-spec.ts";

export interface CellParams {
  matrixId: string;
  runKey: string;
  cell: Cell;
  run: number;
}
