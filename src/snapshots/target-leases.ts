// One writer per target. A backup reads a tree and a restore replaces one: two of them on one (sandbox, path) at
// once would archive a half-swapped tree, or swap each other's trees out (the second restore's rollback putting
// back the first one's half-made work). So each run holds targets/<sandbox>/<hash of path>.json from the moment
// the API accepts it until it ends, taken by a create-only write (the store's compare-and-swap): of two racing
// requests, one gets the lease and the other a 409 naming the run that holds it.
//
// A run that dies without releasing (a killed isolate, a stopped stack) does not block the path for ever: its
// lease is taken over, again by compare-and-swap, once its Workflow is no longer running (or its expiry passed).
//
// Nested paths are one target too: a restore swapping /workspace/app out while a backup archives /workspace would
// archive half a swap. Keys are per path, so after taking its own key a run lists its sandbox's leases and backs off
// (releasing its key) if one on an enclosing or enclosed path is held. Each run writes before it lists, so of two
// racing runs on nested paths the later lister sees the other: at least one is refused (both may be; a retry wins).
import { z } from "zod";
import { listAll } from "../store/list-all.ts";
import type { ObjectStore } from "../store/object-store.ts";

/**
 * A lease as stored, checked where a reader meets leases it did not write itself (the watchdog lists them all).
 * params: the run's Workflow params — the lease is the record of a run in flight, so the watchdog for interrupted
 * runs (runs/interrupted-runs.ts) can run its cleanup when it cannot continue. Absent in leases written before.
 */
export const TargetLeaseSchema = z.object({
  sandboxId: z.string(),
  path: z.string(),
  runId: z.string(),
  kind: z.enum(["backup", "restore"]),
  takenAt: z.string(),
  expiresAt: z.string(),
  params: z.unknown().optional(),
});
export type TargetLease = z.infer<typeof TargetLeaseSchema>;
export type LeaseKind = TargetLease["kind"];

/** Longer than any run's steps with their retries (as restore-leases.ts): a lease this old holds nothing. */
export const TARGET_LEASE_MS = 12 * 3600_000;
/** The API takes the lease before it creates the Workflow: a lease this young holds even though no run answers yet. */
export const TARGET_LEASE_GRACE_MS = 60_000;
/** Every lease lives under this prefix: listing it lists the runs in flight. */
export const TARGETS_PREFIX = "targets/";

const hex = (bytes: ArrayBuffer) => [...new Uint8Array(bytes)].map((b) => b.toString(16).padStart(2, "0")).join("");

/** A sandbox path as a key segment: the first 32 hex characters of its SHA-256 (paths may hold anything). */
export async function pathDigest(path: string): Promise<string> {
  return hex(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(path))).slice(0, 32);
}

export async function targetLeaseKey(sandboxId: string, path: string): Promise<string> {
  return `${TARGETS_PREFIX}${sandboxId}/${await pathDigest(path)}.json`;
}

export async function readLease(store: ObjectStore, key: string): Promise<{ lease: TargetLease; etag: string } | null> {
  const got = await store.get(key);
  return got ? { lease: (await new Response(got.body).json()) as TargetLease, etag: got.etag } : null;
}

/** A stored lease, parsed (a walk over every lease cannot trust what it finds): null when the object is gone. */
export async function parsedLeaseAt(store: ObjectStore, key: string): Promise<{ lease: TargetLease } | { error: string } | null> {
  const got = await store.get(key);
  if (!got) return null;
  const parsed = TargetLeaseSchema.safeParse(await new Response(got.body).json().catch(() => null));
  return parsed.success ? { lease: parsed.data } : { error: `not a lease: ${parsed.error.issues[0]?.message}` };
}

/**
 * Takes the lease of (sandbox, path) for `runId`, or answers the live lease that holds it. `isLive` says whether a
 * holder's run is still going (its Workflow's status); a dead or expired holder's lease is taken over.
 */
export async function takeTargetLease(
  store: ObjectStore,
  want: Pick<TargetLease, "sandboxId" | "path" | "runId" | "kind" | "params">,
  isLive: (holder: TargetLease) => Promise<boolean>,
  now = Date.now(),
): Promise<{ taken: true } | { taken: false; holder: TargetLease }> {
  const own = await takeOwnKey(store, want, isLive, now);
  if (!own.taken) return own;
  const nested = await nestedHolder(store, want, isLive, now);
  if (!nested) return own;
  await releaseTargetLease(store, want.sandboxId, want.path, want.runId);
  return { taken: false, holder: nested };
}

/** Whether one of the two paths is the other or lies below it. */
export function pathsNest(a: string, b: string): boolean {
  const below = (inner: string, outer: string) => outer === "/" || inner === outer || inner.startsWith(`${outer}/`);
  return below(a, b) || below(b, a);
}

/** A held lease of the same sandbox on an enclosing or enclosed path, other than `want`'s own. */
async function nestedHolder(store: ObjectStore, want: Pick<TargetLease, "sandboxId" | "path" | "runId">, isLive: (holder: TargetLease) => Promise<boolean>, now: number): Promise<TargetLease | null> {
  const ownKey = await targetLeaseKey(want.sandboxId, want.path);
  for await (const o of listAll(store, `${TARGETS_PREFIX}${want.sandboxId}/`)) {
    if (o.key === ownKey) continue;
    const held = await readLease(store, o.key);
    if (!held || held.lease.runId === want.runId || !pathsNest(held.lease.path, want.path)) continue;
    if (await holds(held.lease, isLive, now)) return held.lease;
  }
  return null;
}

/** A lease holds while it is young (its Workflow may not exist yet), or unexpired with its run still going. */
async function holds(lease: TargetLease, isLive: (holder: TargetLease) => Promise<boolean>, now: number): Promise<boolean> {
  const young = now - Date.parse(lease.takenAt) < TARGET_LEASE_GRACE_MS;
  const expired = Date.parse(lease.expiresAt) <= now;
  return young || (!expired && (await isLive(lease)));
}

async function takeOwnKey(
  store: ObjectStore,
  want: Pick<TargetLease, "sandboxId" | "path" | "runId" | "kind">,
  isLive: (holder: TargetLease) => Promise<boolean>,
  now: number,
): Promise<{ taken: true } | { taken: false; holder: TargetLease }> {
  const key = await targetLeaseKey(want.sandboxId, want.path);
  const body = JSON.stringify({ ...want, takenAt: new Date(now).toISOString(), expiresAt: new Date(now + TARGET_LEASE_MS).toISOString() } satisfies TargetLease);
  // Each round either writes, or sees a holder that another writer put there since: a few rounds settle any race.
  for (let round = 0; round < 4; round++) {
    if (await store.putIf(key, body, { absent: true }, { contentType: "application/json" })) return { taken: true };
    const held = await readLease(store, key);
    if (!held) continue; // released between our write and our read
    if (held.lease.runId === want.runId) return { taken: true };
    if (await holds(held.lease, isLive, now)) return { taken: false, holder: held.lease };
    if (await store.putIf(key, body, { etag: held.etag }, { contentType: "application/json" })) return { taken: true };
  }
  const held = await readLease(store, key);
  if (held && held.lease.runId !== want.runId) return { taken: false, holder: held.lease };
  return { taken: true };
}

/** Drops the lease if `runId` still holds it (a run that lost it to a takeover must not drop its successor's). */
export async function releaseTargetLease(store: ObjectStore, sandboxId: string, path: string, runId: string): Promise<void> {
  const key = await targetLeaseKey(sandboxId, path);
  const held = await readLease(store, key);
  if (held?.lease.runId === runId) await store.delete(key);
}

/** Best-effort, for the end of a run: a lease left behind is taken over once its run has ended, so a failure here loses nothing. */
export async function releaseTargetLeaseQuietly(store: ObjectStore, sandboxId: string, path: string, runId: string): Promise<void> {
  await releaseTargetLease(store, sandboxId, path, runId).catch((e) => console.warn(`target lease of ${runId} on ${sandboxId}:${path} not released: ${e instanceof Error ? e.message : String(e)}`));
}
