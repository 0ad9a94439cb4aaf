// A restore's hold on its snapshot: restoring/<snapshotId>/<restoreId>, an object with an expiry, in the store before
// the restore's probe reads the record — written by POST /api/restores before it creates the Workflow (the probe then
// refreshes it beside its read), or by the probe itself first for runs started otherwise — and removed when the
// restore no longer reads the store (after verify, by its cleanup, or by the run's failure path). delete-snapshot.ts refuses while a live lease exists. The expiry covers a restore
// whose Workflow died without cleaning up: after it, the lease no longer holds anything.
import type { ObjectStore } from "../store/object-store.ts";
import { listAll } from "../store/list-all.ts";

/** Longer than any restore's steps with their retries; a crashed restore blocks deletion this long at most. */
export const LEASE_MS = 12 * 3600_000;

export const leasePrefix = (snapshotId: string) => `restoring/${snapshotId}/`;
export const leaseKey = (snapshotId: string, restoreId: string) => `${leasePrefix(snapshotId)}${restoreId}`;

/** Idempotent: a retried probe writes the same lease again with a fresh expiry. */
export async function takeLease(store: ObjectStore, snapshotId: string, restoreId: string, now = Date.now()): Promise<void> {
  const body = { snapshotId, restoreId, expiresAt: new Date(now + LEASE_MS).toISOString() };
  await store.put(leaseKey(snapshotId, restoreId), JSON.stringify(body), { contentType: "application/json" });
}

export async function releaseLease(store: ObjectStore, snapshotId: string, restoreId: string): Promise<void> {
  await store.delete(leaseKey(snapshotId, restoreId));
}

/** The restores holding `snapshotId` now; expired leases are removed on the way. */
export async function activeLeases(store: ObjectStore, snapshotId: string, now = Date.now()): Promise<string[]> {
  const live: string[] = [];
  for await (const o of listAll(store, leasePrefix(snapshotId))) {
    const got = await store.get(o.key);
    if (!got) continue;
    const lease = (await new Response(got.body).json()) as { restoreId: string; expiresAt: string };
    if (Date.parse(lease.expiresAt) > now) live.push(lease.restoreId);
    else await store.delete(o.key);
  }
  return live;
}
