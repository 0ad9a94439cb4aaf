// Where a matrix lives. Store (the source of truth): matrices/<id>/matrix.json (spec + cells), runs/<runKey>.json
// (one per finished run), sent.json (how many runs were sent, advanced by compare-and-swap: sent-count.ts),
// dead/<messageId>.json (one per dead-lettered message: dead-letters.ts), summary.json, summary.md.
// KV: matrix:<id> → the progress, a cache rebuilt from the store (progress-cache.ts) that only listing reads;
// nightly:latest → the id of the latest cron matrix.
import { KV_KEYS } from "../kv-keys.ts";
import { listAll } from "../store/list-all.ts";
import type { ObjectStore } from "../store/object-store.ts";
import { getJson, putJson } from "../snapshots/records.ts";
import type { Cell, MatrixSpec } from "./matrix-spec.ts";
import type { RunResult, Summary } from "./summary.ts";

export interface MatrixRecord {
  id: string;
  spec: MatrixSpec;
  cells: Cell[];
  createdAt: string;
  /** how it was started */
  trigger: "http" | "cron" | "queue";
}

export interface MatrixProgress {
  id: string;
  name: string;
  trigger: MatrixRecord["trigger"];
  status: "running" | "complete";
  total: number;
  /** runs sent to the matrix queue so far: at most `done + concurrency` (see sendDueRuns) */
  sent: number;
  done: number;
  failed: number;
  deadLettered: { reason: string; message: string }[];
  createdAt: string;
  updatedAt: string;
}

export const matrixKeys = (id: string) => ({
  record: `matrices/${id}/matrix.json`,
  run: (runKey: string) => `matrices/${id}/runs/${runKey}.json`,
  runs: `matrices/${id}/runs/`,
  summaryJson: `matrices/${id}/summary.json`,
  summaryMd: `matrices/${id}/summary.md`,
  sent: `matrices/${id}/sent.json`,
  dead: (messageId: string) => `matrices/${id}/dead/${messageId}.json`,
  deadPrefix: `matrices/${id}/dead/`,
});

export const readMatrix = (store: ObjectStore, id: string) => getJson<MatrixRecord>(store, matrixKeys(id).record);
export const readSummary = (store: ObjectStore, id: string) => getJson<Summary>(store, matrixKeys(id).summaryJson);
export const writeRun = (store: ObjectStore, r: RunResult) => putJson(store, matrixKeys(r.matrixId).run(r.runKey), r);

export async function readRuns(store: ObjectStore, id: string): Promise<RunResult[]> {
  const keys: string[] = [];
  for await (const o of listAll(store, matrixKeys(id).runs)) keys.push(o.key);
  const runs = await Promise.all(keys.map((k) => getJson<RunResult>(store, k)));
  return runs.filter((r): r is RunResult => r !== null);
}

/** Listing reads KV's cached metadata (one list call, not one store read per matrix): a status there may lag the store's. */
export async function listMatrices(kv: KVNamespace, cursor?: string) {
  const r = await kv.list<{ name: string; status: string; createdAt: string }>({ prefix: KV_KEYS.matrixPrefix, cursor, limit: 100 });
  return {
    matrices: r.keys.map((k) => ({ id: k.name.slice("matrix:".length), ...k.metadata })).sort((a, b) => ((a.createdAt ?? "") < (b.createdAt ?? "") ? 1 : -1)),
    cursor: r.list_complete ? undefined : r.cursor,
  };
}
