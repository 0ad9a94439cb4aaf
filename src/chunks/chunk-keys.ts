// Where chunks live in the store: per tenant, then by the SHA-256 of the chunk's bytes, shared by every snapshot of
// that tenant that has them (a snapshot owns only its index, snapshots/<id>/archive.sqsh.index.json). Nothing but the
// collector deletes here.
//
//   chunks/<sha256>                the default tenant's (every chunk written before tenants existed: unchanged)
//   chunks/t/<tenant>/<sha256>     any other tenant's
//
// Why per tenant: a backup gets PUT URLs only for the chunks the store lacks, so the answer tells the sandbox whether
// a chunk is present. With one namespace that says whether ANY snapshot of the deployment holds content the sandbox
// can guess (issue 21 case 3, docs/security.md); under its tenant's prefix it says only that the tenant's own
// snapshots do. The tenant is named by the API caller (the platform), never by a sandbox.
import { SnapflowError } from "../errors.ts";
import { DEFAULT_TENANT, TENANT } from "../snapshots/tenant.ts";

export const CHUNK_PREFIX = "chunks/";
const TENANT_PREFIX = `${CHUNK_PREFIX}t/`;
const DIGEST = /^[0-9a-f]{64}$/;

/**
 * The key of `tenant`'s chunk whose SHA-256 is `sha256`. Only a tenant name and a digest make a key: the digests
 * come from a sandbox's index (parsed against its schema first, agent-answers.ts), and a name such as
 * `zz/../<another digest>` would otherwise be signed as a key the sandbox chose (URL normalisation resolves the dot
 * segments); a tenant with a slash or dots could reach into another tenant's prefix the same way.
 */
export function chunkKey(tenant: string, sha256: string): string {
  if (!TENANT.test(tenant)) throw new SnapflowError("unbound_write", `a chunk key needs a tenant of 1 to 63 characters a-z, 0-9 and '-', got ${JSON.stringify(tenant.slice(0, 80))}`);
  if (!DIGEST.test(sha256)) throw new SnapflowError("unbound_write", `a chunk key needs a digest of 64 lowercase hex characters, got ${JSON.stringify(sha256.slice(0, 80))}`);
  return tenant === DEFAULT_TENANT ? `${CHUNK_PREFIX}${sha256}` : `${TENANT_PREFIX}${tenant}/${sha256}`;
}

/**
 * The tenant and digest a chunk key names (either form), or null for a key that is not a chunk's: nothing else
 * (and no `chunks/t/default/…`, which chunkKey never makes) is ever taken for one, so the collector leaves it alone.
 */
export function chunkOfKey(key: string): { tenant: string; digest: string } | null {
  if (!key.startsWith(CHUNK_PREFIX)) return null;
  const rest = key.slice(CHUNK_PREFIX.length);
  if (DIGEST.test(rest)) return { tenant: DEFAULT_TENANT, digest: rest };
  if (!key.startsWith(TENANT_PREFIX)) return null;
  const [tenant, digest, ...more] = key.slice(TENANT_PREFIX.length).split("/");
  if (more.length || !tenant || !digest || tenant === DEFAULT_TENANT || !TENANT.test(tenant) || !DIGEST.test(digest)) return null;
  return { tenant, digest };
}

/** The digest a chunk key names (either form), or null for a key that is not a chunk's. */
export function digestOfKey(key: string): string | null {
  return chunkOfKey(key)?.digest ?? null;
}
