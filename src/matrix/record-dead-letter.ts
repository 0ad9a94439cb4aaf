// Recording a dead letter (the dead-letter queue's consumer): see dead-letters.ts for where each one is kept. A
// cell message that failed every retry also records its run as failed, so the matrix can finish, and the matrix's
// progress is refreshed.
import type { Deps } from "../deps.ts";
import { KV_KEYS } from "../kv-keys.ts";
import { putJson } from "../snapshots/records.ts";
import { keySegment, orphanDeadLetterKey, type DeadLetter } from "./dead-letters.ts";
import { matrixKeys, readMatrix, writeRun } from "./matrix-records.ts";
import { runKey } from "./matrix-spec.ts";
import { MatrixMessage, ResultMessage } from "./messages.ts";
import { refreshProgressCache } from "./progress-cache.ts";

async function lastQueueError(kv: KVNamespace, messageId: string): Promise<string | null> {
  // The retries' last error is kept in KV best-effort (consume-each.ts): without it the reason is a generic one.
  return kv.get(KV_KEYS.queueError(messageId)).catch(() => null);
}

export async function recordDeadLetter(d: Deps, results: Queue, id: string, body: unknown): Promise<void> {
  const parsed = MatrixMessage.or(ResultMessage).safeParse(body);
  const reason = (await lastQueueError(d.kv, id)) ?? (parsed.success ? "failed every retry" : `not a valid message: ${parsed.error.issues[0]!.path.join(".")}: ${parsed.error.issues[0]!.message}`);
  const matrixId = typeof body === "object" && body && "matrixId" in body && typeof body.matrixId === "string" ? body.matrixId : undefined;
  const entry: DeadLetter = { messageId: id, reason, message: JSON.stringify(body).slice(0, 500), at: new Date().toISOString() };
  const record = matrixId ? await readMatrix(d.store, matrixId).catch(() => null) : null;
  if (!matrixId || !record) {
    await putJson(d.store, orphanDeadLetterKey(id), entry);
    return;
  }
  await putJson(d.store, matrixKeys(matrixId).dead(keySegment(id)), entry);
  // A run that can never start is a failed run: recording it lets the matrix finish (and send its next runs).
  if (parsed.success && parsed.data.type === "cell") {
    const { cell, run } = parsed.data;
    const key = runKey(matrixId, cell, run);
    await writeRun(d.store, { matrixId, runKey: key, cell, run, ok: false, error: `dead-lettered: ${reason}`, finishedAt: new Date().toISOString() });
    await results.send({ type: "result", matrixId, runKey: key });
  }
  await refreshProgressCache(d, matrixId);
}

