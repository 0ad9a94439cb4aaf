// Mounts that died with an agent. A lazy restore's FUSE file is served by snapflow-lazy, a child of the agent: when
// the agent is killed (with its process group) the helper goes too, and its FUSE mount answers every access with
// ENOTCONN; the kernel's squashfs reading the image through a loop device from that FUSE file, and an overlay with
// that image as its lower layer, can never serve a byte again. The mount registry (mounts.ts) is in memory, so the
// agent that starts next does not know them, and a restore's retry could not mount at their mount points.
//
// So the agent, before it listens (and on every sweep), finds them in /proc/self/mountinfo under its sandboxes'
// roots and detaches them, those on top first (umount -l: a dead FUSE mount cannot be unmounted cleanly). A live
// mount is never touched: a mount is dead only if it is a FUSE mount whose root fails with ENOTCONN, or if it reads
// from a dead one (a loop device's backing file below it, an overlay layer below it).
import { readFile, stat } from "node:fs/promises";
import { basename } from "node:path";
import { runQuiet } from "../images/images.ts";
import { isFuseType, readMountinfo, type MountInfo } from "./mounts.ts";

const below = (path: string, dir: string) => dir === "/" || path === dir || path.startsWith(`${dir}/`);

/** The host paths a mount reads from: a loop device's backing file, an overlay's layers. */
async function readsFrom(m: MountInfo): Promise<string[]> {
  if (m.source.startsWith("/dev/loop")) {
    const file = await readFile(`/sys/block/${basename(m.source)}/loop/backing_file`, "utf8").catch(() => "");
    return file ? [file.trim().replace(/ \(deleted\)$/, "")] : [];
  }
  if (m.fstype === "overlay") {
    return m.superOptions.flatMap((o) => {
      const [k, v] = o.split("=", 2);
      return k === "lowerdir" ? v!.split(":") : k === "upperdir" || k === "workdir" ? [v!] : [];
    });
  }
  return [];
}

async function fuseIsDead(m: MountInfo): Promise<boolean> {
  if (!isFuseType(m.fstype)) return false;
  const code = await stat(m.mountPoint).then(() => null, (e: NodeJS.ErrnoException) => e.code);
  return code === "ENOTCONN" || code === "ECONNABORTED";
}

/** Detaches the dead mounts under `roots` (host paths), top first; answers the mount points it detached. */
export async function sweepDeadMounts(roots: string[]): Promise<string[]> {
  const mounts = (await readMountinfo()).filter((m) => roots.some((r) => below(m.mountPoint, r)));
  const dead = new Set<string>();
  for (const m of mounts) if (await fuseIsDead(m)) dead.add(m.mountPoint);
  if (!dead.size) return [];
  // What reads from a dead mount is dead too, and so on up the stack (FUSE file → image → overlay).
  const sources = new Map(await Promise.all(mounts.map(async (m) => [m.mountPoint, await readsFrom(m)] as const)));
  for (let grew = true; grew; ) {
    grew = false;
    for (const m of mounts) {
      if (dead.has(m.mountPoint)) continue;
      if ((sources.get(m.mountPoint) ?? []).some((src) => [...dead].some((d) => below(src, d)))) {
        dead.add(m.mountPoint);
        grew = true;
      }
    }
  }
  // mountinfo lists mounts in the order they were made: the last made stands on the earlier ones.
  const order = mounts.map((m) => m.mountPoint).filter((p) => dead.has(p)).reverse();
  const detached: string[] = [];
  for (const p of order) if (await runQuiet(["umount", "-l", p]).then(() => true, () => false)) detached.push(p);
  return detached;
}
