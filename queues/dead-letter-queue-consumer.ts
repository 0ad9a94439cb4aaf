// snapflow-dlq: a message that failed every retry is recorded (never retried again) so it is visible, not lost.
import { depsFrom } from "../src/deps.ts";
import { recordDeadLetter } from "../src/matrix/record-dead-letter.ts";

export async function consumeDeadLetters(batch: MessageBatch<unknown>, env: Env): Promise<void> {
  const d = depsFrom(env);
  for (const m of batch.messages) {
    await recordDeadLetter(d, env.RESULTS_QUEUE, m.id, m.body);
    m.ack();
  }
}
