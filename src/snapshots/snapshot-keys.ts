// The store keys of a snapshot's parts and of a restore's record (records.ts has the layout and re-exports these).
// Their own module, so that what records.ts uses (dependants.ts) can name a record's key without importing records.
import { extensionOf, type ArchiveFormat } from "../../container/contract/protocol.ts";

export const archiveKey = (id: string, format: ArchiveFormat) => `snapshots/${id}/archive.${extensionOf(format)}`;
export const manifestKey = (id: string) => `snapshots/${id}/manifest.json`;
export const snapshotRecordKey = (id: string) => `snapshots/${id}/snapshot.json`;
/** a delta's deleted paths (relative to the tree), removed before its archive is extracted */
export const deletedKey = (id: string) => `snapshots/${id}/deleted.json`;
export const restoreRecordKey = (id: string) => `restores/${id}.json`;
