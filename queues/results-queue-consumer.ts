// snapflow-results: each finished run makes the aggregator rebuild its matrix's summary and send the next runs.
// The queue runs this consumer one batch at a time (max_concurrency 1, wrangler.jsonc).
import { depsFrom } from "../src/deps.ts";
import { processResult } from "../src/matrix/aggregate.ts";
import { consumeEach } from "./consume-each.ts";

export function consumeResultsBatch(batch: MessageBatch<unknown>, env: Env): Promise<void> {
  const d = depsFrom(env);
  return consumeEach(batch, d.kv, (body) => processResult(d, env.MATRIX_QUEUE, body));
}
