// Bringing KV's index back into agreement with the store, whose records are the truth: an index entry without a
// record is dropped (a delete that stopped halfway), a record without an entry is indexed again (a record step
// whose KV write was lost). Run by the cron trigger before retention, so retention plans over a true index. KV may
// refuse a write (429, about one per second per key): each is tried again after the window, and one still refused
// is left for the next run rather than stopping the others.
import type { Deps } from "../deps.ts";
import { KV_KEYS } from "../kv-keys.ts";
import { writeAfterKvWindow } from "../kv-write-retry.ts";
import { listAll } from "../store/list-all.ts";
import { allSnapshots } from "./list-snapshots.ts";
import { getJson, indexSnapshot, snapshotRecordKey, type SnapshotRecord } from "./records.ts";

const RECORD = /^snapshots\/([^/]+)\/snapshot\.json$/;

/** The ids of every snapshot record in the store. */
export async function storedSnapshotIds(d: Deps): Promise<string[]> {
  const ids: string[] = [];
  for await (const o of listAll(d.store, "snapshots/")) {
    const m = RECORD.exec(o.key);
    if (m) ids.push(m[1]!);
  }
  return ids;
}

export async function reconcileIndex(d: Deps): Promise<{ dropped: string[]; reindexed: string[] }> {
  const stored = new Set(await storedSnapshotIds(d));
  const indexed = new Set((await allSnapshots(d.kv)).map((s) => s.id));
  const dropped: string[] = [];
  for (const id of [...indexed].filter((id) => !stored.has(id))) {
    if (await kvWrite(`drop the index entry of ${id}`, () => d.kv.delete(KV_KEYS.snapshot(id)))) dropped.push(id);
  }
  const reindexed: string[] = [];
  for (const id of [...stored].filter((id) => !indexed.has(id))) {
    const record = await getJson<SnapshotRecord>(d.store, snapshotRecordKey(id));
    if (record && (await kvWrite(`index ${id}`, () => indexSnapshot(d.kv, record)))) reindexed.push(id);
  }
  return { dropped, reindexed };
}

async function kvWrite(what: string, write: () => Promise<unknown>): Promise<boolean> {
  try {
    await writeAfterKvWindow(write);
    return true;
  } catch (e) {
    console.warn(`reconcile: could not ${what} (left for the next run): ${e instanceof Error ? e.message : String(e)}`);
    return false;
  }
}
