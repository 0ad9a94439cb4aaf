// The hook between deleting a snapshot and the chunk garbage collector. A whole-archive snapshot owns its archive
// outright (delete-snapshot.ts removes it with the snapshot's other objects). A chunked snapshot owns only its index
// (snapshots/<id>/archive.sqsh.index.json, removed with those objects too); its chunks are shared and must never be
// deleted here: the collector (src/chunks/chunk-gc.ts, hourly and POST /api/chunks/gc) deletes a chunk once no index
// names it and it is older than the grace period, which keeps it safe against backups running at the same time.
// So releasing is: nothing to do now, the index going away is the release.
import type { Deps } from "../deps.ts";
import type { SnapshotRecord } from "./records.ts";

export async function releaseChunks(_d: Deps, _record: SnapshotRecord): Promise<void> {}
