// The tenant: the account or project that owns sandboxes and their snapshots, named by the API caller (the platform)
// on every backup and restore, never by a sandbox. Its one effect today is the chunk namespace (chunks/chunk-keys.ts):
// dedup answers only within a tenant. A record without one is the default tenant's (snapshots from before tenants).
import { z } from "zod";

export const DEFAULT_TENANT = "default";
export const TENANT = /^[a-z0-9-]{1,63}$/;

export const Tenant = z.string().regex(TENANT, "1 to 63 characters a-z, 0-9 and '-'");

/** The tenant a snapshot record belongs to. */
export const tenantOf = (record: { tenant?: string }): string => record.tenant ?? DEFAULT_TENANT;
