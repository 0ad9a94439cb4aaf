// Dead letters, recorded by the dead-letter queue's consumer (record-dead-letter.ts; this module reads them, so
// that the matrix status can list them without importing the recorder, which refreshes that status): a message that failed every retry is recorded with its
// reason (the last error the consumer kept, or why it does not parse), so it is visible rather than lost. Each one
// is its own object in the store — matrices/<id>/dead/<messageId>.json for a message naming a matrix that exists,
// dead-letters/<messageId>.json otherwise — so recording one never rewrites another: dead letters recorded while
// the aggregator runs (the two consumers run concurrently) cannot be lost, and a redelivered one is written once.
import type { Deps } from "../deps.ts";
import { listAll } from "../store/list-all.ts";
import { getJson } from "../snapshots/records.ts";
import { matrixKeys } from "./matrix-records.ts";

export interface DeadLetter {
  messageId: string;
  reason: string;
  /** the message, as JSON, cut to 500 characters */
  message: string;
  at: string;
}

/** A queue message id as a key segment (ids are hex today; anything else is replaced, never trusted as a path). */
export const keySegment = (messageId: string) => messageId.replace(/[^A-Za-z0-9._-]/g, "_").slice(0, 200) || "_";

export const orphanDeadLetterKey = (messageId: string) => `dead-letters/${keySegment(messageId)}.json`;

/** Every dead letter of one matrix, in key order. */
export async function readDeadLetters(d: Deps, matrixId: string): Promise<DeadLetter[]> {
  const keys: string[] = [];
  for await (const o of listAll(d.store, matrixKeys(matrixId).deadPrefix)) keys.push(o.key);
  const letters = await Promise.all(keys.map((k) => getJson<DeadLetter>(d.store, k)));
  return letters.filter((l): l is DeadLetter => l !== null);
}
