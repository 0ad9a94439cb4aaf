// How many of a matrix's runs were sent to the matrix queue, kept in the store (matrices/<id>/sent.json) and only
// ever moved forward by compare-and-swap (putIf on the etag it was read with): two senders racing cannot move it
// back, and the loser re-reads and sees the other's value. KV held it before and could lose an update.
import type { ObjectStore } from "../store/object-store.ts";
import { matrixKeys } from "./matrix-records.ts";

export interface SentCount {
  sent: number;
  /** the etag the count was read with; null when nothing was sent yet (the object is absent) */
  etag: string | null;
}

export async function readSentCount(store: ObjectStore, matrixId: string): Promise<SentCount> {
  const o = await store.get(matrixKeys(matrixId).sent);
  if (!o) return { sent: 0, etag: null };
  const { sent } = (await new Response(o.body).json()) as { sent: number };
  return { sent, etag: o.etag };
}

/**
 * Moves the count from `read.sent` to `to` if nobody moved it since it was read: true when it did, false when the
 * caller must read again (another sender got there first).
 */
export async function advanceSentCount(store: ObjectStore, matrixId: string, read: SentCount, to: number): Promise<boolean> {
  if (to <= read.sent) return true;
  const body = JSON.stringify({ sent: to, updatedAt: new Date().toISOString() });
  const written = await store.putIf(matrixKeys(matrixId).sent, body, read.etag === null ? { absent: true } : { etag: read.etag }, { contentType: "application/json" });
  return written !== null;
}
