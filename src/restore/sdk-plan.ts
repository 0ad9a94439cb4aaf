// The SDK's own restore (sdk-restore): the Sandbox SDK's restoreBackup, measured like every preset. It reads what the
// SDK's createBackup writes (backups/<uuid>/data.sqsh and meta.json in the BACKUP_BUCKET binding's bucket), so:
//
//   transfer    → the Worker copies the snapshot's squashfs image to backups/<uuid>/data.sqsh, hashing it on the
//                 way (a copy that is not the snapshot's bytes fails here), and writes the meta.json the SDK reads
//                 (createdAt and ttl: it refuses an expired backup). <uuid> is derived from the restore's id, so
//                 a retried step writes the same keys.
//   materialize → an empty directory is swapped in at the target (the old tree kept beside it, as every restore
//                 does), then restoreBackup({id, dir: target}): the SDK's container downloads the image and mounts
//                 it at the target (squashfuse under fuse-overlayfs, writable). The SDK's objects are removed once
//                 it has mounted: the image it mounts is its container's local copy.
//   verify      → the tree at the target is walked against the snapshot's manifest (the SDK's download is not
//                 checked by anyone else: verify walks it, it does not trust the image's SHA-256).
//   cleanup     → the SDK's mount at the target taken down (our agent runs in the same container), its objects
//                 removed; then the rollback puts the old tree back.
//
// Production only: needs an SDK container (the registry marks it unavailable under the local transport, naming
// why). Verified here: types only (npm run typecheck) and the preset's unavailability; not run on a real account.
import { SnapflowError } from "../errors.ts";
import { since } from "../phases/phase-runner.ts";
import { toHex } from "../store/hash-stream.ts";
import { partSizeFor, uploadStreamMultipart } from "../store/multipart-upload.ts";
import { checkStrategyRuns } from "../strategies/check-strategy-runs.ts";
import { formatName } from "../strategies/registry.ts";
import { sdkBackupKeys } from "../backup/transfer/sdk-backup.ts";
import type { RestoreContext } from "./restore-context.ts";
import type { RestoreProbeResult } from "./restore-params.ts";
import type { RestorePlan } from "./restore-plan.ts";
import { checkTarget } from "./target-check.ts";

/** How long the SDK's copy stays restorable by its meta.json (it is removed once mounted, or by the cleanup). */
const SDK_TTL_SECONDS = 24 * 3600;

/** The SDK takes only UUIDs as backup ids: one derived from the restore's id, the same on every retry. */
export async function sdkRestoreUuid(restoreId: string): Promise<string> {
  const h = toHex(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(`sdk-restore\n${restoreId}`))).slice(0, 32);
  // Version 4 and the RFC 4122 variant, so that it is a well-formed UUID.
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-${((parseInt(h[16]!, 16) & 0x3) | 0x8).toString(16)}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

const keysOf = async (c: RestoreContext) => sdkBackupKeys(await sdkRestoreUuid(c.p.restoreId));

export const sdkPlan: RestorePlan = {
  keeps: () => "image",
  // the SDK's container downloads the image itself, unchecked: its tree is walked
  servesCheckedImage: () => false,
  async probe(c, snapshot) {
    const { p, s, agent } = c;
    if (snapshot.delta) throw new SnapflowError("bad_request", `snapshot ${p.snapshotId} is a delta: ${s.name} restores a whole squashfs image`, { field: "strategy" });
    if (snapshot.format.kind !== "squashfs" || snapshot.format.chunks) {
      throw new SnapflowError("bad_request", `strategy ${s.name} restores squashfs images; snapshot ${p.snapshotId} is ${formatName(snapshot.format)}`, { field: "strategy" });
    }
    checkStrategyRuns(s, await (c.asked?.tools ?? agent.probe()), p.sandboxId, c.d.transport.kind);
    await (c.asked?.target ?? checkTarget(c));
    const { id, format, archive, manifest } = snapshot;
    return { snapshot: { id, format, archive, manifest }, layers: [{ id, format, archive }] };
  },

  async transfer(c, probed) {
    const t = performance.now();
    const { d, p } = c;
    const keys = await keysOf(c);
    const got = await d.store.get(probed.snapshot.archive.key);
    if (!got) throw new SnapflowError("snapshot_unusable", `archive ${probed.snapshot.archive.key} of snapshot ${p.snapshotId} is missing`);
    const up = await uploadStreamMultipart(d.store, keys.archive, got.body, { partSize: partSizeFor(got.size), concurrency: 2 });
    const { bytes, sha256 } = probed.snapshot.archive;
    if (up.bytes !== bytes || up.sha256 !== sha256) {
      await d.store.delete([keys.archive]);
      throw new SnapflowError("transfer_damaged", `archive of ${p.snapshotId} copied for the SDK damaged: ${up.bytes} bytes sha256 ${up.sha256}, expected ${bytes} bytes sha256 ${sha256}`);
    }
    // The fields the SDK's createBackup writes; restoreBackup reads createdAt and ttl.
    const meta = { id: keys.archive.split("/")[1], dir: p.path, name: `snapflow ${p.snapshotId}`, sizeBytes: bytes, ttl: SDK_TTL_SECONDS, createdAt: new Date().toISOString() };
    await d.store.put(keys.meta, JSON.stringify(meta), { contentType: "application/json" });
    return { ms: since(t), bytes, sha256, copiedTo: keys.archive };
  },

  async materialize(c) {
    const t = performance.now();
    const { d, p, agent } = c;
    if (!d.transport.sdkRestore) throw new SnapflowError("strategy_unavailable", `${c.s.name} needs a Sandbox SDK container; this Worker's sandboxes use the ${d.transport.kind} transport`);
    const keys = await keysOf(c);
    // Repeatable: a retry finds the empty directory in already, and the SDK unmounts what an earlier call mounted there.
    const swapped = await agent.swapIn(p.path, p.restoreId);
    const sdkStarted = performance.now();
    await d.transport.sdkRestore(p.sandboxId, { id: keys.archive.split("/")[1]!, dir: p.path });
    const sdkMs = since(sdkStarted);
    await d.store.delete([keys.archive, keys.meta]);
    return { ms: since(t), bytes: 0, how: "the SDK's restoreBackup: squashfuse under fuse-overlayfs, at the target", sdkMs, swappedIn: true, swapMs: swapped.ms };
  },

  // The empty directory went in before the SDK mounted over it: answered as made.
  swapIn: (c) => c.agent.swapIn(c.p.path, c.p.restoreId),

  async afterSwap(c, _probed, check) {
    const walked = await check(c.p.path);
    return { files: walked.files, dirs: walked.dirs, symlinks: walked.symlinks, bytes: walked.bytes, verified: walked.verified };
  },

  async cleanup(c, _probed: RestoreProbeResult) {
    const keys = await keysOf(c);
    await c.agent.unmount(c.p.path).catch(() => {});
    await c.d.store.delete([keys.archive, keys.meta]);
  },
};
