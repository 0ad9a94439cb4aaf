// What the collectors read of snapshots/ in one run: the listing the mark starts from, the listing the recheck
// reads again, and each record, each fetched once however many collectors ask (chunk-gc.ts marks image chunks
// from the indexes and their records' tenants, pack-gc.ts file-level packs from the records). Run together
// (collect-store.ts), the chunk and the pack collector list snapshots/ twice between them, not twice each, and read
// a record once: the hourly run's store operations grow with the snapshots kept, and listing is what R2 bills most.
import type { ListedObject, ObjectStore } from "../store/object-store.ts";
import { listAll } from "../store/list-all.ts";
import { getJson } from "../snapshots/records.ts";

export async function listEvery(store: ObjectStore, prefix: string): Promise<ListedObject[]> {
  const out: ListedObject[] = [];
  for await (const o of listAll(store, prefix)) out.push(o);
  return out;
}

export class SnapshotListing {
  private listed?: Promise<ListedObject[]>;
  private relisted?: Promise<ListedObject[]>;
  private readonly records = new Map<string, Promise<unknown>>();

  readonly store: ObjectStore;

  constructor(store: ObjectStore) {
    this.store = store;
  }

  /** snapshots/ as the mark sees it (listed on the first call). */
  first(): Promise<ListedObject[]> {
    return (this.listed ??= listEvery(this.store, "snapshots/"));
  }

  /**
   * snapshots/ listed again for the recheck, on the first call after the mark. Shared, it may be taken before the
   * other collector's sweep candidates: what a backup recorded after it relies on, its verify step HEADs right
   * before its record (chunks: chunked.ts, packs: files.ts), which closes that window as it closes each alone.
   */
  again(): Promise<ListedObject[]> {
    return (this.relisted ??= listEvery(this.store, "snapshots/"));
  }

  /** A record (or any JSON object under snapshots/) by key, read once; null when it is gone. */
  json<T>(key: string): Promise<T | null> {
    let read = this.records.get(key);
    if (!read) this.records.set(key, (read = getJson<T>(this.store, key)));
    return read as Promise<T | null>;
  }
}
