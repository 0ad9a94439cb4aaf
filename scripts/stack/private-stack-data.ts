// After a benchmark's private stack stops: what its sandboxes still had mounted (a restore whose unmount failed
// keeps its image busy and its directory undeletable) is unmounted, top first, and its data removed (logs stay, for a
// look afterwards). Shared by the peers race and the forks bench, which each start a stack of their own.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { q, sh } from "../bench/peers/shell.ts";

export async function removePrivateStackData(stackDir: string, log: (line: string) => void): Promise<void> {
  const mounts = readFileSync("/proc/mounts", "utf8").split("\n").map((l) => l.split(" ")[1] ?? "").filter((m) => m.startsWith(stackDir + "/"));
  // -l: a lazy mount whose helper died answers ENOTCONN and cannot be unmounted cleanly.
  for (const m of mounts.reverse()) await sh(`umount -l ${q(m)}`).catch((e: Error) => log(`could not unmount ${m}: ${e.message}`));
  for (const d of ["s3", "sandboxes", "wrangler-state"]) await sh(`rm -rf ${q(join(stackDir, d))}`).catch((e: Error) => log(`could not remove ${d}: ${e.message}`));
}
