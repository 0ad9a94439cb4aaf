// Dead letters, recorded by the dead-letter queue's consumer: a message that failed every retry is recorded with its reason (the last error
// the consumer kept, or why it does not parse) in its matrix's status, so it is visible rather than lost.
import type { Deps } from "../deps.ts";
import { KV_KEYS } from "../kv-keys.ts";
import { readProgress, writeProgress, writeRun } from "./matrix-records.ts";
import { runKey } from "./matrix-spec.ts";
import { MatrixMessage, ResultMessage } from "./messages.ts";

export async function recordDeadLetter(d: Deps, results: Queue, id: string, body: unknown): Promise<void> {
  const parsed = MatrixMessage.or(ResultMessage).safeParse(body);
  const reason = (await d.kv.get(KV_KEYS.queueError(id))) ?? (parsed.success ? "failed every retry" : `not a valid message: ${parsed.error.issues[0]!.path.join(".")}: ${parsed.error.issues[0]!.message}`);
  const matrixId = typeof body === "object" && body && "matrixId" in body && typeof body.matrixId === "string" ? body.matrixId : undefined;
  const entry = { reason, message: JSON.stringify(body).slice(0, 500) };
  const progress = matrixId ? await readProgress(d.kv, matrixId) : null;
  if (progress) {
    progress.deadLettered.push(entry);
    progress.updatedAt = new Date().toISOString();
    await writeProgress(d.kv, progress);
    // A run that can never start is a failed run: recording it lets the matrix finish (and send its next runs).
    if (parsed.success && parsed.data.type === "cell") {
      const { matrixId: mid, cell, run } = parsed.data;
      const key = runKey(mid, cell, run);
      await writeRun(d.store, { matrixId: mid, runKey: key, cell, run, ok: false, error: `dead-lettered: ${reason}`, finishedAt: new Date().toISOString() });
      await results.send({ type: "result", matrixId: mid, runKey: key });
    }
  } else {
    await d.kv.put(KV_KEYS.deadLetter(id), JSON.stringify(entry), { expirationTtl: 30 * 24 * 3600 });
  }
}
