// After a stack restart, the benchmark cells of running matrices (BenchmarkCellWorkflow instances, one per run, the
// run's key as instance id: matrix/start-cell-run.ts) are stuck like any other instance the engine was running
// (workflow-controls.ts). They hold no target lease, so they are found through their matrices: every run key of
// every matrix still running is asked, and one that says running or waiting is paused and resumed (only when the
// stack has just restarted: cells keep no per-step progress to judge a stall by); one the watchdog paused earlier
// and that finished pausing since is resumed on any pass. A cell's failure is its own result (the cell Workflow
// records it), so resuming is all the watchdog does for it.
import type { Deps } from "../deps.ts";
import { errorMessage } from "../errors.ts";
import { listMatrices, readMatrix } from "../matrix/matrix-records.ts";
import { cellsOf, runKey, runsOf } from "../matrix/matrix-spec.ts";
import { noteInterruption, readInterruptions } from "./interruptions.ts";
import { pauseThenResume, StillPausing } from "./workflow-controls.ts";

export interface CellWatch {
  resumed: string[];
  errors: { runKey: string; error: string }[];
}

export async function resumeInterruptedCells(env: Env, d: Deps, restartedAt?: number): Promise<CellWatch> {
  const out: CellWatch = { resumed: [], errors: [] };
  const cause = restartedAt === undefined ? "" : `the stack restarted at ${new Date(restartedAt).toISOString()} while it ran`;
  let cursor: string | undefined;
  do {
    const page = await listMatrices(d.kv, cursor);
    cursor = page.cursor;
    for (const m of page.matrices.filter((x) => x.status === "running")) {
      const record = await readMatrix(d.store, m.id);
      if (!record) continue;
      for (const { cell, run } of runsOf(record.spec, cellsOf(record.spec))) {
        const key = runKey(m.id, cell, run);
        try {
          const instance = await env.CELL_WORKFLOW.get(key).catch(() => null);
          if (!instance) continue; // not sent yet
          const status = (await instance.status()).status;
          const at = new Date().toISOString();
          if (status === "paused") {
            const last = (await readInterruptions(d.kv, key)).at(-1);
            if (last?.action !== "pausing") continue; // paused by someone else
            await instance.resume();
            await noteInterruption(d.kv, key, { at, cause: last.cause, action: "resumed" });
            out.resumed.push(key);
            continue;
          }
          if (restartedAt === undefined || (status !== "running" && status !== "waiting")) continue;
          await pauseThenResume(instance, async () => void (await noteInterruption(d.kv, key, { at, cause, action: "pausing" })), false);
          await noteInterruption(d.kv, key, { at, cause, action: "resumed" });
          out.resumed.push(key);
        } catch (e) {
          out.errors.push({ runKey: key, error: e instanceof StillPausing ? "still finishing a step; resumed by a later pass" : errorMessage(e) });
        }
      }
    }
  } while (cursor);
  return out;
}
