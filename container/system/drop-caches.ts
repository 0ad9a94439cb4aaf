// Cold-cache runs: `sync; echo 3 > /proc/sys/vm/drop_caches`, as the seeds did between runs. It needs root (and a
// writable /proc/sys, which containers often lack); when it is not permitted the answer says why instead of failing,
// so a benchmark can report that its caches were warm.
import { writeFile } from "node:fs/promises";
import { runTool } from "./run-tool.ts";

export async function dropCaches(): Promise<{ dropped: boolean; ms: number; reason?: string }> {
  const started = performance.now();
  try {
    await runTool(["sync"], 60_000);
    await writeFile("/proc/sys/vm/drop_caches", "3\n");
    return { dropped: true, ms: Math.round(performance.now() - started) };
  } catch (e) {
    return { dropped: false, ms: Math.round(performance.now() - started), reason: (e as Error).message };
  }
}
