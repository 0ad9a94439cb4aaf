// What a matrix-queue message does. A "cell" message starts one BenchmarkCellWorkflow whose instance id is the
// run's key, so a redelivered message finds the instance already there and starts nothing. A "start" message
// starts a whole matrix (queue-driven batch runs).
import type { Deps } from "../deps.ts";
import { newMatrixId } from "../ids.ts";
import { runKey } from "./matrix-spec.ts";
import { MatrixMessage, type CellMessage } from "./messages.ts";
import { startMatrix } from "./schedule.ts";

export async function startCellRun(workflow: Workflow, msg: CellMessage): Promise<"started" | "already started"> {
  const id = runKey(msg.matrixId, msg.cell, msg.run);
  const exists = async () => workflow.get(id).then(() => true, () => false);
  if (await exists()) return "already started";
  try {
    await workflow.create({ id, params: { matrixId: msg.matrixId, runKey: id, cell: msg.cell, run: msg.run } });
    return "started";
  } catch (e) {
    // Two deliveries racing: the other one created it.
    if (await exists()) return "already started";
    throw e;
  }
}

export async function processMatrixMessage(env: Env, d: Deps, body: unknown): Promise<string> {
  const msg = MatrixMessage.parse(body);
  if (msg.type === "start") {
    const record = await startMatrix(d, env.MATRIX_QUEUE, msg.id ?? newMatrixId(), msg.spec, "queue");
    return `started matrix ${record.id}`;
  }
  return startCellRun(env.CELL_WORKFLOW, msg);
}
