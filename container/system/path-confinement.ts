// Path confinement. Every path in the agent's API is a *sandbox path* ("/workspace/app"): absolute, inside
// one of the allowed roots (configured: sandbox-roots.ts). The agent maps it onto the host below the sandbox's root directory ("/" in the
// production image, one directory per sandbox id when the agent runs on a host for many sandboxes).
//
// Three escapes are refused with a 400 that names the field: a '..' segment, a path outside the allowed
// roots, and a symlink on the way that leads out of the root (checked on the deepest existing ancestor, so
// paths that do not exist yet are checked too).
import { lstat, realpath } from "node:fs/promises";
import { join, posix } from "node:path";
import { AgentError } from "../http/agent-error.ts";
import { normalizeSandboxPath } from "../contract/protocol.ts";
import { sandboxRoots } from "../contract/sandbox-roots.ts";

export interface SandboxRoot {
  /** host directory that stands for "/" inside this sandbox */
  hostRoot: string;
}

export function checkSandboxPath(path: unknown, field: string): string {
  if (typeof path !== "string") throw new AgentError("bad_request", `${field} is required`, field);
  const r = normalizeSandboxPath(path);
  if (!r.ok) throw new AgentError(r.outside ? "path_outside_root" : "bad_request", `${field} ${r.reason}`, field);
  return r.path;
}

/** Maps a sandbox path to a host path and refuses symlink escapes. */
export async function resolveSandboxPath(root: SandboxRoot, path: unknown, field: string): Promise<string> {
  const normal = checkSandboxPath(path, field);
  const host = join(root.hostRoot, normal);
  const realRoot = await realpath(root.hostRoot);
  // Walk up to the deepest part of the path that exists and see where it really points.
  let probe = host;
  for (;;) {
    try {
      const real = await realpath(probe);
      const allowed = await Promise.all(sandboxRoots().map((r) => realpath(join(root.hostRoot, r)).catch(() => join(realRoot, r))));
      if (!allowed.some((a) => real === a || real.startsWith(a + "/"))) {
        throw new AgentError("path_outside_root", `${field} '${normal}' leads through a symlink out of the allowed roots`, field);
      }
      return host;
    } catch (e) {
      if (e instanceof AgentError) throw e;
      if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
      // A dangling symlink: writing through it would create its target, wherever that is. Something there that
      // resolves now was made between the two calls (another request making the same parent): looked at again.
      if (await lstat(probe).then(() => true, () => false)) {
        if (await realpath(probe).then(() => true, () => false)) continue;
        throw new AgentError("path_outside_root", `${field} '${normal}' leads through a dangling symlink`, field);
      }
      const parent = posix.dirname(probe);
      if (parent === probe) return host;
      probe = parent;
    }
  }
}
