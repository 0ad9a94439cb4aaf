// Where the file-level format's packs live (native/lazy/internal/filecas): one object per backup that had new chunks,
// named by that backup's snapshot id, under its tenant. A snapshot's index names packs by those ids; the Worker makes
// each key from the snapshot's tenant and a name it checked, never from a sandbox's string as it is.
//
//   packs/<tenant>/<snapshot id>
//
// Nothing but the pack collector (pack-gc.ts) deletes here: a pack outlives the snapshot that wrote it while any
// later snapshot of its lineage still names it.
import { SnapflowError } from "../errors.ts";
import { TENANT } from "../snapshots/tenant.ts";

export const PACK_PREFIX = "packs/";
/** A snapshot id (api/schemas.ts RUN_ID): the only names a pack has. */
export const PACK_NAME = /^[a-z]{2}-\d{14}-[0-9a-f]{8}$/;

export function packKey(tenant: string, name: string): string {
  if (!TENANT.test(tenant)) throw new SnapflowError("unbound_write", `a pack key needs a tenant of 1 to 63 characters a-z, 0-9 and '-', got ${JSON.stringify(tenant.slice(0, 80))}`);
  if (!PACK_NAME.test(name)) throw new SnapflowError("unbound_write", `a pack key needs a snapshot id as its name, got ${JSON.stringify(name.slice(0, 80))}`);
  return `${PACK_PREFIX}${tenant}/${name}`;
}

/** The tenant and name a pack key holds, or null for any other key (the collector leaves those alone). */
export function packOfKey(key: string): { tenant: string; name: string } | null {
  if (!key.startsWith(PACK_PREFIX)) return null;
  const [tenant, name, ...more] = key.slice(PACK_PREFIX.length).split("/");
  if (more.length || !tenant || !name || !TENANT.test(tenant) || !PACK_NAME.test(name)) return null;
  return { tenant, name };
}
