// Everything that crosses the matrix and results queues, as zod schemas (messages are validated on receipt: a
// message that does not parse is poison and ends in the dead-letter queue with the reason).
import { z } from "zod";
import { MatrixSpec } from "./matrix-spec.ts";

/** One run of one cell: a dataset × a backup preset × a restore preset, run number `run`. */
export const CellMessage = z.object({
  type: z.literal("cell"),
  matrixId: z.string(),
  cell: z.object({ index: z.number().int().nonnegative(), dataset: z.string(), backup: z.string(), restore: z.string() }),
  run: z.number().int().positive(),
});
export type CellMessage = z.infer<typeof CellMessage>;

/** A queue-driven batch run: start this matrix. */
export const StartMessage = z.object({ type: z.literal("start"), id: z.string().optional(), spec: MatrixSpec });

export const MatrixMessage = z.discriminatedUnion("type", [CellMessage, StartMessage]);
export type MatrixMessage = z.infer<typeof MatrixMessage>;

/** A finished run, from the cell Workflow to the aggregator. */
export const ResultMessage = z.object({ type: z.literal("result"), matrixId: z.string(), runKey: z.string() });
export type ResultMessage = z.infer<typeof ResultMessage>;
