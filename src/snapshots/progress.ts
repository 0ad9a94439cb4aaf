// Progress of a backup or restore in KV, for status pages and the CLI. Best-effort: KV allows about one write per
// second per key and may refuse one; a refused progress write is logged and never fails (or undoes) a run, whose
// outcome lives in its steps and the store. The final progress (complete or errored) is tried again once the
// one-second window has passed, so that a run's status shows all its steps, not the last accepted write's.
import { writeAfterKvWindow } from "../kv-write-retry.ts";
import { writeProgress, type RunProgress } from "./records.ts";

export async function reportProgress(kv: KVNamespace, progress: RunProgress): Promise<void> {
  try {
    const write = () => writeProgress(kv, progress);
    await (progress.status === "running" ? write() : writeAfterKvWindow(write));
  } catch (e) {
    console.warn(`progress of ${progress.id} not written: ${e instanceof Error ? e.message : String(e)}`);
  }
}

/**
 * A run's progress writes, in order and off its path: a `running` write is queued behind the one before and not
 * waited for (each was an awaited KV put between two steps: a wake waited for three of them before it was usable);
 * `final` waits for the queue, then writes the outcome. Best-effort as reportProgress is.
 */
export function progressReporter(kv: KVNamespace): { report(progress: RunProgress): void; final(progress: RunProgress): Promise<void> } {
  let queue: Promise<void> = Promise.resolve();
  return {
    report(progress) {
      queue = queue.then(() => reportProgress(kv, progress));
    },
    async final(progress) {
      const endedAt = new Date().toISOString();
      await queue;
      await reportProgress(kv, { ...progress, endedAt });
    },
  };
}
