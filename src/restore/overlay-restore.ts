// overlay-restore: a writable workspace as a read-only base image plus a layer of changes, the seeds'
// incremental scheme. The base (a squashfs snapshot) is fetched and mounted with squashfuse; an overlay-delta
// snapshot's archive (the upper directory it was taken from, whiteouts included) is extracted into a new upper
// directory; overlayfs then joins them at the target, where writes land in the upper again, ready for the next
// overlay-delta backup. Restoring a plain squashfs snapshot this way gives the same writable workspace with an
// empty layer.
import type { Deps } from "../deps.ts";
import { PermanentError } from "../phase-errors.ts";
import { AgentClient } from "../sandbox/agent-client.ts";
import { presign } from "../store/s3-store.ts";
import { readSnapshot, type SnapshotRecord, type StepResult } from "../snapshots/records.ts";
import { formatName } from "../strategies/registry.ts";
import type { RestoreParams } from "./restore-phases.ts";

export type OverlayLayer = Pick<SnapshotRecord, "id" | "format" | "archive">;

const since = (t: number) => Math.round(performance.now() - t);
export const overlayPaths = (p: RestoreParams) => ({
  image: `/snapflow/images/${p.restoreId}.sqsh`,
  lower: `/snapflow/mnt/${p.restoreId}`,
  upper: `/snapflow/overlays/${p.restoreId}/upper`,
});

/** The base image first, then the upper layer when the snapshot is an overlay delta. */
export async function overlayLayers(d: Deps, p: RestoreParams, snapshot: SnapshotRecord): Promise<OverlayLayer[]> {
  const layer = (r: SnapshotRecord): OverlayLayer => ({ id: r.id, format: r.format, archive: r.archive });
  if (snapshot.delta?.kind === "overlay-upper") {
    const base = await readSnapshot(d.store, d.kv, snapshot.delta.base);
    if (!base) throw new PermanentError(`overlay delta ${snapshot.id} is on ${snapshot.delta.base}, which does not exist any more`);
    if (base.format.kind !== "squashfs") throw new PermanentError(`overlay delta ${snapshot.id}'s base ${base.id} is ${formatName(base.format)}, not a squashfs image`);
    return [layer(base), layer(snapshot)];
  }
  if (snapshot.format.kind !== "squashfs") throw new PermanentError(`overlay-restore mounts a squashfs base; snapshot ${snapshot.id} is ${formatName(snapshot.format)}`);
  return [layer(snapshot)];
}

export async function overlayTransfer(d: Deps, p: RestoreParams, layers: OverlayLayer[]): Promise<StepResult> {
  const t = performance.now();
  const agent = new AgentClient(d.transport, p.sandboxId);
  const where = overlayPaths(p);
  const url = (layer: OverlayLayer) => presign(d.s3, layer.archive.key, "GET", d.config.PRESIGN_EXPIRY_SECONDS);
  const [base, upper] = layers;
  const got = [await agent.downloadFromUrl({ url: await url(base!), output: where.image })];
  if (upper) {
    if (upper.format.kind !== "tar") throw new PermanentError(`overlay delta ${upper.id} is not a tar archive`);
    await agent.deleteFile(where.upper);
    got.push(await agent.downloadFromUrl({ url: await url(upper), extract: { path: where.upper, format: upper.format } }));
  }
  got.forEach((g, i) => {
    const want = layers[i]!.archive;
    if (g.bytes !== want.bytes || g.sha256 !== want.sha256) throw new Error(`archive of ${layers[i]!.id} arrived damaged: sha256 ${g.sha256}, expected ${want.sha256}`);
  });
  return { ms: since(t), bytes: got.reduce((n, g) => n + g.bytes, 0), layers: layers.length };
}

export async function overlayMaterialize(d: Deps, p: RestoreParams, layers: OverlayLayer[]): Promise<StepResult> {
  const t = performance.now();
  const agent = new AgentClient(d.transport, p.sandboxId);
  const where = overlayPaths(p);
  const base = layers[0]!;
  if (base.format.kind !== "squashfs") throw new PermanentError(`overlay base ${base.id} is not squashfs`);
  // A retry finds the earlier attempt's mounts: take them down first (the overlay goes with its lower).
  await agent.unmount(where.lower).catch(() => {});
  await agent.deleteFile(p.path);
  const mounted = await agent.materialize({ archive: where.image, path: where.lower, format: base.format, how: "mount-fuse" });
  const overlay = await agent.json<{ upper: string; ms: number }>("mount overlay", "/v1/overlay", {
    lower: where.lower, path: p.path, how: "kernel", ...(layers.length > 1 ? { upper: where.upper } : {}),
  });
  return { ms: since(t), bytes: 0, baseMountMs: mounted.ms, overlayMs: overlay.ms, upper: overlay.upper };
}

export async function overlayCleanup(d: Deps, p: RestoreParams): Promise<void> {
  const agent = new AgentClient(d.transport, p.sandboxId);
  const where = overlayPaths(p);
  await agent.unmount(p.path).catch(() => {});
  await agent.unmount(where.lower).catch(() => {});
  for (const path of [where.image, where.lower, `/snapflow/overlays/${p.restoreId}`, p.path]) await agent.deleteFile(path).catch(() => {});
}
