// What a stopped stack leaves mounted. A restore's mounts (kernel image mounts, overlays, and a lazy restore's FUSE
// file with the image over it) belong to the agent's sandboxes; when the stack stops, the agent and its
// snapflow-lazy helpers go, and a lazy mount is left answering every read with an I/O error until the next start
// sweeps it. So stopping the stack detaches every mount below its sandboxes' directory, the last made first
// (`umount -l`: a dead FUSE mount cannot be unmounted cleanly), after its processes have exited.
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";

/** mountinfo escapes space, tab, newline and backslash in paths as octal. */
const unescape = (field: string) => field.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));

/** The mount points at or below `dir`, in the order they were made. */
export function mountsBelow(dir: string, mountinfo = readFileSync("/proc/self/mountinfo", "utf8")): string[] {
  return mountinfo.split("\n").filter(Boolean).map((line) => unescape(line.split(" ")[4] ?? "")).filter((p) => p === dir || p.startsWith(`${dir}/`));
}

/** Detaches every mount below `dir`, top first; answers the ones it detached. */
export function detachMountsBelow(dir: string): string[] {
  const detached: string[] = [];
  for (const p of mountsBelow(dir).reverse()) if (spawnSync("umount", ["-l", p]).status === 0) detached.push(p);
  return detached;
}
