// Where the file-level format's objects live (native/lazy/internal/filecas): one pack per backup that had new chunks,
// and one index per backup (whole, or a layer over its parent's: filecas layer.go), each named by that backup's
// snapshot id, under its tenant. A snapshot's index names packs by those ids; the Worker makes each key from the
// snapshot's tenant and a name it checked, never from a sandbox's string as it is.
//
//   packs/<tenant>/<snapshot id>
//   file-indexes/<tenant>/<snapshot id>
//
// Nothing but the pack collector (pack-gc.ts) deletes here: a pack outlives the snapshot that wrote it while any
// later snapshot of its lineage still names it, and an index while a later snapshot's index is a layer over it.
// (File-level snapshots recorded before 2026-11-27 keep their index at snapshots/<id>/archive.fidx.zst.)
import { SnapflowError } from "../errors.ts";
import { TENANT } from "../snapshots/tenant.ts";

export const PACK_PREFIX = "packs/";
export const INDEX_PREFIX = "file-indexes/";
/** A snapshot id (api/schemas.ts RUN_ID): the only names a pack has. */
export const PACK_NAME = /^[a-z]{2}-\d{14}-[0-9a-f]{8}$/;

function keyUnder(prefix: string, what: string, tenant: string, name: string): string {
  if (!TENANT.test(tenant)) throw new SnapflowError("unbound_write", `${what} key needs a tenant of 1 to 63 characters a-z, 0-9 and '-', got ${JSON.stringify(tenant.slice(0, 80))}`);
  if (!PACK_NAME.test(name)) throw new SnapflowError("unbound_write", `${what} key needs a snapshot id as its name, got ${JSON.stringify(name.slice(0, 80))}`);
  return `${prefix}${tenant}/${name}`;
}

export const packKey = (tenant: string, name: string): string => keyUnder(PACK_PREFIX, "a pack", tenant, name);
/** A file-level snapshot's index object (its record's archive.key; a later snapshot's chain may name it too). */
export const indexKey = (tenant: string, name: string): string => keyUnder(INDEX_PREFIX, "an index", tenant, name);

/** The tenant and name a key under `prefix` holds, or null for any other key (the collector leaves those alone). */
export function nameOfKey(prefix: string, key: string): { tenant: string; name: string } | null {
  if (!key.startsWith(prefix)) return null;
  const [tenant, name, ...more] = key.slice(prefix.length).split("/");
  if (more.length || !tenant || !name || !TENANT.test(tenant) || !PACK_NAME.test(name)) return null;
  return { tenant, name };
}

