// snapflow-matrix: cell messages start one benchmark run each; start messages start a whole matrix.
import { depsFrom } from "../src/deps.ts";
import { processMatrixMessage } from "../src/matrix/start-cell-run.ts";
import { consumeEach } from "./consume-each.ts";

export function consumeMatrixBatch(batch: MessageBatch<unknown>, env: Env): Promise<void> {
  const d = depsFrom(env);
  return consumeEach(batch, d.kv, (body) => processMatrixMessage(env, d, body));
}
