// Disk space is a precondition, not a surprise. Before a restore writes anything it checks that the sandbox can
// hold all of it at once: the new tree beside the target (the old tree stays until the restore is recorded) and,
// for a staged path, the archive or image in snapflow's area; on one filesystem the two add up. Short, it fails at
// once and for good, naming the path, what is free and the shortfall, and pointing at a -pipe strategy when the
// staged archive is what does not fit: instead of filling the disk half-way and retrying into the same full disk.
import { SnapflowError } from "../errors.ts";
import { SANDBOX_DIRS } from "../../container/contract/sandbox-layout.ts";
import type { AgentClient } from "../sandbox/agent-client.ts";
import type { RestoreStrategy } from "../strategies/registry.ts";
import type { RestoreProbeResult } from "./restore-params.ts";
import { planOf } from "./plans.ts";
import { RESTORE_TRANSFERS } from "./transfer/index.ts";

/** Each entry can take up to a block more than its bytes (and a directory at least one): a bound, not a guess. */
const BLOCK = 4096;

export function treeFootprint(m: { bytes: number; files: number; dirs: number; symlinks: number }): number {
  return m.bytes + (m.files + m.dirs + m.symlinks) * BLOCK;
}

interface Need {
  path: string;
  bytes: number;
  what: string;
}

/** Where a restore by `s` into `target` writes, and what: the archives' bytes, or the tree's footprint. */
function placesOf(s: RestoreStrategy, target: string): { path: string; holds: "archives" | "tree"; what: string }[] {
  // The plan says what it keeps (its materialization's, for an archive).
  const keeps = planOf(s).keeps(s);
  if (keeps === "overlay") return [{ path: SANDBOX_DIRS.images, holds: "archives", what: "the base image and the overlay's layer" }];
  if (keeps === "image") return [{ path: SANDBOX_DIRS.images, holds: "archives", what: "the image to mount" }];
  const tree = { path: target, holds: "tree" as const, what: "the restored tree" };
  if (RESTORE_TRANSFERS[s.path].piped) return [tree];
  return [tree, { path: SANDBOX_DIRS.staging, holds: "archives", what: "the staged archive" }];
}

/** What a restore writes, and where. */
export function restoreNeeds(s: RestoreStrategy, target: string, probed: Pick<RestoreProbeResult, "snapshot" | "layers">): Need[] {
  const archives = probed.layers.reduce((n, l) => n + l.archive.bytes, 0);
  return placesOf(s, target).map(({ path, holds, what }) => ({ path, what, bytes: holds === "archives" ? archives : treeFootprint(probed.snapshot.manifest) }));
}

type Space = Awaited<ReturnType<AgentClient["space"]>>;

/**
 * The paths a restore by `s` into `target` checks for space: they depend on the strategy alone, so the probe asks the
 * sandbox as it starts, beside its read of the record (`asked` below).
 */
export function spacePaths(s: RestoreStrategy, target: string): string[] {
  return placesOf(s, target).map((p) => p.path);
}

export async function checkRestoreSpace(agent: AgentClient, sandboxId: string, s: RestoreStrategy, target: string, probed: Pick<RestoreProbeResult, "snapshot" | "layers">, asked?: ReadonlyMap<string, Promise<Space>>): Promise<{ checked: { path: string; needBytes: number; freeBytes: number }[] }> {
  const needs = restoreNeeds(s, target, probed);
  const spaces = await Promise.all(needs.map((n) => asked?.get(n.path) ?? agent.space(n.path)));
  // Needs on one filesystem share its free space.
  const byDevice = new Map<string, { free: number; needs: Need[] }>();
  needs.forEach((n, i) => {
    const d = byDevice.get(spaces[i]!.device) ?? { free: spaces[i]!.freeBytes, needs: [] };
    d.needs.push(n);
    byDevice.set(spaces[i]!.device, d);
  });
  for (const { free, needs: here } of byDevice.values()) {
    const total = here.reduce((n, x) => n + x.bytes, 0);
    if (total <= free) continue;
    const parts = here.map((x) => `${x.what} ${x.bytes} bytes at ${x.path}`).join(" + ");
    const staged = here.some((x) => x.path === SANDBOX_DIRS.staging);
    throw new SnapflowError("insufficient_space", `sandbox ${sandboxId} has ${free} bytes free on the filesystem of ${here[0]!.path}; this restore needs about ${total} (${parts}): short by ${total - free} bytes. Free space${staged ? ", or use a -pipe strategy, which stages no archive" : ""}`, { field: "path" });
  }
  return { checked: needs.map((n, i) => ({ path: n.path, needBytes: n.bytes, freeBytes: spaces[i]!.freeBytes })) };
}
