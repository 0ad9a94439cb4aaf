// Deletes never go through a mount or pull the floor from under one: a recursive rm would empty a writable
// overlay's layer, fail half-way on a read-only image, or remove the image file or layer directory a live mount
// reads from. Checked against /proc/self/mountinfo (mount points at or below the target) and the registry
// (the host paths a mount stands on: image file, lower, upper, work).
import { AgentError } from "../http/agent-error.ts";
import { readMountinfo, type MountRegistry } from "./mounts.ts";

const atOrBelow = (path: string, dir: string) => path === dir || path.startsWith(dir + "/");

/** Throws a 400 naming `field` when deleting `target` would touch a mount; `hostRoot` makes messages sandbox paths. */
export async function refuseIfMounted(target: string, field: string, hostRoot: string, registry: MountRegistry, sandboxId: string): Promise<void> {
  const shown = (p: string) => (hostRoot === "/" ? p : p.slice(hostRoot.length));
  const mounted = (await readMountinfo()).find((m) => atOrBelow(m.mountPoint, target));
  if (mounted) throw new AgentError("bad_request", `${field} has a mount at or below it (${shown(mounted.mountPoint)}); unmount it first`, field);
  const backing = registry.records(sandboxId).find((r) => r.hostSources.some((s) => atOrBelow(s, target)));
  if (backing) throw new AgentError("bad_request", `${field} holds what the mount at ${shown(backing.hostPath)} reads from; unmount it first`, field);
}
