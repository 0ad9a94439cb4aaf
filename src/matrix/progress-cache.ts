// KV's copy of a matrix's progress (matrix:<id>), for listing only: rebuilt from the store after every change and
// written best-effort. KV allows about one write per second per key and may refuse one (429); a refused write is
// logged and never fails the consumer that made it, and loses nothing, because the store holds the truth and the
// next refresh writes it again. A refused write of the final ("complete") progress is tried again after a second
// or two, so that listing does not show a finished matrix as running until the next change (there is none).
import type { Deps } from "../deps.ts";
import { KV_KEYS } from "../kv-keys.ts";
import { writeAfterKvWindow } from "../kv-write-retry.ts";
import type { MatrixProgress, MatrixRecord } from "./matrix-records.ts";
import { readMatrixStatus } from "./matrix-status.ts";
import type { RunResult } from "./summary.ts";

const writeCache = (kv: KVNamespace, p: MatrixProgress) =>
  kv.put(KV_KEYS.matrix(p.id), JSON.stringify(p), { metadata: { name: p.name, status: p.status, createdAt: p.createdAt } });

export async function refreshProgressCache(d: Deps, matrixId: string, known?: { record: MatrixRecord; runs: RunResult[] }): Promise<MatrixProgress | null> {
  let progress: MatrixProgress | null = null;
  try {
    const p = await readMatrixStatus(d, matrixId, known);
    progress = p;
    if (!p) return null;
    const write = () => writeCache(d.kv, p);
    await (p.status === "complete" ? writeAfterKvWindow(write) : write());
    return p;
  } catch (e) {
    console.warn(`progress cache of matrix ${matrixId} not written: ${e instanceof Error ? e.message : String(e)}`);
    return progress;
  }
}

