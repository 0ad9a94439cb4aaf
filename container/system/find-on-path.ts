// Where an executable is on PATH, as `command -v` answers it: the probe reports tools this way and the mounts
// pick a FUSE driver this way. Empty PATH entries are skipped (they would mean the agent's working directory).
// Synchronous on purpose, and without an exception per miss: through libuv's thread pool each lookup cost 30–60 µs
// here and a thrown ENOENT ~15 µs, so the probe's 17 tools over a 14-entry PATH took 8–15 ms of every run's first
// step (a wake waits for it); a stat that answers undefined for a missing file costs a few µs.
import { accessSync, constants, statSync } from "node:fs";
import { delimiter, join } from "node:path";

export async function findOnPath(name: string): Promise<string | null> {
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    if (!dir) continue;
    const path = join(dir, name);
    const st = statSync(path, { throwIfNoEntry: false });
    if (!st?.isFile() || (st.mode & 0o111) === 0) continue;
    try {
      accessSync(path, constants.X_OK); // executable by this process, as the shell asks
      return path;
    } catch {
      // another user's: the next directory
    }
  }
  return null;
}
