// Where an executable is on PATH, as `command -v` answers it: the probe reports tools this way and the mounts
// pick a FUSE driver this way. Empty PATH entries are skipped (they would mean the agent's working directory).
import { constants } from "node:fs";
import { access } from "node:fs/promises";
import { delimiter, join } from "node:path";

export async function findOnPath(name: string): Promise<string | null> {
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    if (dir && (await access(join(dir, name), constants.X_OK).then(() => true, () => false))) return join(dir, name);
  }
  return null;
}
