// The hook between deleting a snapshot and the chunk garbage collector. A whole-archive snapshot owns its archive
// outright (delete-snapshot.ts removes it with the snapshot's other objects), so there is nothing to release. A
// content-addressed snapshot (an index of chunks/<sha256>, shared with other snapshots) must never delete its
// chunks itself: it hands its index to the chunk GC, which deletes a chunk only when no snapshot references it and
// no backup is writing it. That GC is not built yet; when it is, it plugs in here.
import type { Deps } from "../deps.ts";
import type { SnapshotRecord } from "./records.ts";

export async function releaseChunks(_d: Deps, record: SnapshotRecord): Promise<void> {
  // Whole-archive snapshots (every format today): nothing is shared, nothing to hand over.
  if (!("chunks" in record)) return;
  throw new Error(`snapshot ${record.id} is chunked, and the chunk garbage collector does not exist yet: its chunks cannot be released`);
}
