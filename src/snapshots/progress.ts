// Progress of a backup or restore in KV, for status pages and the CLI. Best-effort: KV allows about one write per
// second per key and may refuse one; a refused progress write is logged and never fails (or undoes) a run, whose
// outcome lives in its steps and the store.
import { writeProgress, type RunProgress } from "./records.ts";

export async function reportProgress(kv: KVNamespace, progress: RunProgress): Promise<void> {
  try {
    await writeProgress(kv, progress);
  } catch (e) {
    console.warn(`progress of ${progress.id} not written: ${e instanceof Error ? e.message : String(e)}`);
  }
}
