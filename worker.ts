// The Worker's entry: it only wires. HTTP goes to the API router, queue batches to their consumers (queues/), the
// cron triggers to the nightly matrix and the snapshot lifecycle (expiries, retention); the Workflow classes and
// the Sandbox Durable Object are re-exported so wrangler can bind them. It sits above src/, queues/ and workflows/
// so that arrows only point down from here.
import { errorResponse } from "./src/api/http.ts";
import { handleApi } from "./src/api/routes.ts";
import { startNightly } from "./src/matrix/nightly.ts";
import { LIFECYCLE_CRON, runLifecycle } from "./src/snapshots/lifecycle-cron.ts";
import { STACK_START_TRIGGER, WATCHDOG_CRON } from "./src/snapshots/lifecycle-schedule.ts";
import { runWatchdog } from "./src/runs/interrupted-runs.ts";
import { consumeDeadLetters } from "./queues/dead-letter-queue-consumer.ts";
import { consumeMatrixBatch } from "./queues/matrix-queue-consumer.ts";
import { consumeResultsBatch } from "./queues/results-queue-consumer.ts";

export { Sandbox } from "@cloudflare/sandbox";
export { BackupWorkflow } from "./workflows/backup-workflow.ts";
export { RestoreWorkflow } from "./workflows/restore-workflow.ts";
export { BenchmarkCellWorkflow } from "./workflows/cell-workflow.ts";
export { CompactWorkflow } from "./workflows/compact-workflow.ts";

export default {
  async fetch(request, env) {
    try {
      return await handleApi(request, env);
    } catch (e) {
      return errorResponse(e);
    }
  },

  async queue(batch, env) {
    if (batch.queue.startsWith("snapflow-matrix")) return consumeMatrixBatch(batch, env);
    if (batch.queue.startsWith("snapflow-results")) return consumeResultsBatch(batch, env);
    return consumeDeadLetters(batch, env);
  },

  async scheduled(controller, env) {
    if (controller.cron === WATCHDOG_CRON || controller.cron === STACK_START_TRIGGER) {
      await runWatchdog(env, controller.cron, controller.scheduledTime);
      return;
    }
    if (controller.cron === LIFECYCLE_CRON) {
      await runLifecycle(env, new Date(controller.scheduledTime));
      return;
    }
    const id = await startNightly(env, new Date(controller.scheduledTime));
    console.log(`cron ${controller.cron}: started matrix ${id}`);
  },
} satisfies ExportedHandler<Env, unknown>;
