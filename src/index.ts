// The Worker's entry: it only wires. HTTP goes to the API router, queue batches to their consumers, the cron
// trigger to the nightly matrix; the Workflow classes and the Sandbox Durable Object are re-exported so wrangler
// can bind them.
import { ApiError, errorResponse, json } from "./api/http.ts";
import { handleApi } from "./api/routes.ts";
import { ConfigError } from "./config.ts";
import { depsFrom } from "./deps.ts";
import { startNightly } from "./matrix/nightly.ts";
import { consumeEach, processMatrixMessage } from "../queues/cell-consumer.ts";
import { recordDeadLetter } from "../queues/dead-letter-consumer.ts";
import { processResult } from "../queues/results-consumer.ts";

export { Sandbox } from "@cloudflare/sandbox";
export { BackupWorkflow } from "../workflows/backup-workflow.ts";
export { RestoreWorkflow } from "../workflows/restore-workflow.ts";
export { BenchmarkCellWorkflow } from "../workflows/cell-workflow.ts";

export default {
  async fetch(request, env) {
    try {
      return await handleApi(request, env);
    } catch (e) {
      if (e instanceof ApiError) return errorResponse(e);
      if (e instanceof ConfigError) return json({ error: { message: e.message } }, 500);
      console.error("unhandled", e);
      return json({ error: { message: `internal error: ${(e as Error).message ?? String(e)}` } }, 500);
    }
  },

  async queue(batch, env) {
    const d = depsFrom(env);
    if (batch.queue.startsWith("snapflow-matrix")) return consumeEach(batch, d.kv, (body) => processMatrixMessage(env, d, body));
    if (batch.queue.startsWith("snapflow-results")) return consumeEach(batch, d.kv, (body) => processResult(d, env.MATRIX_QUEUE, body));
    // The dead-letter queue: record, never retry.
    for (const m of batch.messages) {
      await recordDeadLetter(d, env.RESULTS_QUEUE, m.id, m.body);
      m.ack();
    }
  },

  async scheduled(controller, env) {
    const id = await startNightly(env, new Date(controller.scheduledTime));
    console.log(`cron ${controller.cron}: started matrix ${id}`);
  },
} satisfies ExportedHandler<Env, unknown>;
