// Dead letters, recorded by the dead-letter queue's consumer: a message that failed every retry is recorded with its
// reason (the last error the consumer kept, or why it does not parse), so it is visible rather than lost. Each one
// is its own object in the store — matrices/<id>/dead/<messageId>.json for a message naming a matrix that exists,
// dead-letters/<messageId>.json otherwise — so recording one never rewrites another: dead letters recorded while
// the aggregator runs (the two consumers run concurrently) cannot be lost, and a redelivered one is written once.
import type { Deps } from "../deps.ts";
import { KV_KEYS } from "../kv-keys.ts";
import { listAll } from "../store/list-all.ts";
import { getJson, putJson } from "../snapshots/records.ts";
import { matrixKeys, readMatrix, writeRun } from "./matrix-records.ts";
import { runKey } from "./matrix-spec.ts";
import { MatrixMessage, ResultMessage } from "./messages.ts";
import { refreshProgressCache } from "./progress-cache.ts";

export interface DeadLetter {
  messageId: string;
  reason: string;
  /** the message, as JSON, cut to 500 characters */
  message: string;
  at: string;
}

/** A queue message id as a key segment (ids are hex today; anything else is replaced, never trusted as a path). */
const keySegment = (messageId: string) => messageId.replace(/[^A-Za-z0-9._-]/g, "_").slice(0, 200) || "_";

export const orphanDeadLetterKey = (messageId: string) => `dead-letters/${keySegment(messageId)}.json`;

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

/** Every dead letter of one matrix, in key order. */
export async function readDeadLetters(d: Deps, matrixId: string): Promise<DeadLetter[]> {
  const keys: string[] = [];
  for await (const o of listAll(d.store, matrixKeys(matrixId).deadPrefix)) keys.push(o.key);
  const letters = await Promise.all(keys.map((k) => getJson<DeadLetter>(d.store, k)));
  return letters.filter((l): l is DeadLetter => l !== null);
}
