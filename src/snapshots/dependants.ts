// Which snapshots build on which: a delta (changed-files or overlay-upper) writes a small mark under its base,
// snapshots/<base>/dependants/<id>, before its own record. Marks live in the store beside the base, so the answer
// to "who depends on this?" is one strongly consistent list, not a scan of every record or a KV read that may lag.
//
// A mark without a record is a delta still being recorded (or a failed one whose cleanup did not run): it counts as
// a dependant for MARK_GRACE_MS after it was written, then only if its record exists.
import type { ObjectStore } from "../store/object-store.ts";
import { listAll } from "../store/list-all.ts";
import { snapshotRecordKey } from "./snapshot-keys.ts";

const MARK_GRACE_MS = 60 * 60_000;

export const dependantsPrefix = (base: string) => `snapshots/${base}/dependants/`;
export const dependantKey = (base: string, id: string) => `${dependantsPrefix(base)}${id}`;

export async function addDependant(store: ObjectStore, base: string, id: string): Promise<void> {
  await store.put(dependantKey(base, id), JSON.stringify({ id, markedAt: new Date().toISOString() }), { contentType: "application/json" });
}

export async function removeDependant(store: ObjectStore, base: string, id: string): Promise<void> {
  await store.delete(dependantKey(base, id));
}

/** The snapshots that build on `base` directly (recorded, or being recorded now). */
export async function listDependants(store: ObjectStore, base: string, now = Date.now()): Promise<string[]> {
  const ids: string[] = [];
  for await (const o of listAll(store, dependantsPrefix(base))) {
    const id = o.key.slice(dependantsPrefix(base).length);
    if (await store.head(snapshotRecordKey(id))) {
      ids.push(id);
      continue;
    }
    const mark = await store.get(o.key);
    const markedAt = mark ? Date.parse(((await new Response(mark.body).json()) as { markedAt?: string }).markedAt ?? "") : NaN;
    if (now - markedAt < MARK_GRACE_MS) ids.push(id);
  }
  return ids;
}
