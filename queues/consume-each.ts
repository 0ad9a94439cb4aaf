// The loop every consumer shares: process each message, ack it, or retry it keeping its last error in KV so that,
// if it ends in the dead-letter queue, the dead-letter record can say why. That KV write is best-effort: a refused
// one (429) costs the reason's detail, never the batch (the message is retried either way).
import { ZodError } from "zod";
import { KV_KEYS } from "../src/kv-keys.ts";

/** A one-line reason: a schema failure names the field, like the API's 400s. */
export function describeError(e: unknown): string {
  if (e instanceof ZodError) {
    const issue = e.issues[0]!;
    return `not a valid message: ${issue.path.join(".") || "body"}: ${issue.message}`;
  }
  return e instanceof Error ? e.message : String(e);
}

export async function consumeEach<T>(batch: MessageBatch<T>, kv: KVNamespace, work: (body: T) => Promise<unknown>): Promise<void> {
  for (const message of batch.messages) {
    try {
      await work(message.body);
      message.ack();
    } catch (e) {
      const reason = describeError(e);
      console.error(`queue ${batch.queue}: message ${message.id} attempt ${message.attempts} failed: ${reason}`);
      await kv.put(KV_KEYS.queueError(message.id), reason, { expirationTtl: 7 * 24 * 3600 }).catch((kvError: unknown) => {
        console.warn(`queue ${batch.queue}: last error of ${message.id} not kept: ${kvError instanceof Error ? kvError.message : String(kvError)}`);
      });
      message.retry();
    }
  }
}
