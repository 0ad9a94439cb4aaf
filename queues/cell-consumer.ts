// The matrix queue's consumer. A "cell" message starts one BenchmarkCellWorkflow whose instance id is the run's key,
// so a redelivered message finds the instance already there and starts nothing. A "start" message starts a whole
// matrix (queue-driven batch runs). A message that fails is retried; its last error is kept so that, if it ends in
// the dead-letter queue, the matrix status can say why.
import { ZodError } from "zod";
import { startMatrix } from "./matrix-producer.ts";
import { MatrixMessage, type CellMessage } from "./messages.ts";
import { runKey } from "../src/matrix/matrix-spec.ts";
import { newMatrixId } from "../src/matrix/matrix-ids.ts";
import type { Deps } from "../src/deps.ts";

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

/** A one-line reason: a schema failure names the field, like the API's 400s. */
export function describeError(e: unknown): string {
  if (e instanceof ZodError) {
    const issue = e.issues[0]!;
    return `not a valid message: ${issue.path.join(".") || "body"}: ${issue.message}`;
  }
  return e instanceof Error ? e.message : String(e);
}

/** Acks or retries each message; a retried message's error is kept for the dead-letter consumer. */
export async function consumeEach<T>(batch: MessageBatch<T>, kv: KVNamespace, work: (body: T) => Promise<unknown>): Promise<void> {
  for (const message of batch.messages) {
    try {
      await work(message.body);
      message.ack();
    } catch (e) {
      const reason = describeError(e);
      console.error(`queue ${batch.queue}: message ${message.id} attempt ${message.attempts} failed: ${reason}`);
      await kv.put(`queue-error:${message.id}`, reason, { expirationTtl: 7 * 24 * 3600 });
      message.retry();
    }
  }
}
