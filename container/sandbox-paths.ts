// Path confinement. Every path in the agent's API is a *sandbox path* ("/workspace/app"): absolute, inside
// one of the allowed roots. The agent maps it onto the host below the sandbox's root directory ("/" in the
// production image, one directory per sandbox id when the agent runs on a host for many sandboxes).
//
// Three escapes are refused with a 400 that names the field: a '..' segment, a path outside the allowed
// roots, and a symlink on the way that leads out of the root (checked on the deepest existing ancestor, so
// paths that do not exist yet are checked too).
import { lstat, realpath } from "node:fs/promises";
import { join, posix } from "node:path";
import { AgentError } from "./agent-error.ts";

export const ALLOWED_ROOTS = ["/workspace", "/snapflow"] as const;

export interface SandboxRoot {
  /** host directory that stands for "/" inside this sandbox */
  hostRoot: string;
}

/** Checks the syntax of a sandbox path and returns it normalised. Pure: no I/O. */
export function checkSandboxPath(path: unknown, field: string): string {
  if (typeof path !== "string" || path.length === 0) throw new AgentError("bad_request", `${field} is required`, field);
  if (path.includes("\0")) throw new AgentError("bad_request", `${field} contains a NUL byte`, field);
  if (!path.startsWith("/")) throw new AgentError("bad_request", `${field} must be an absolute sandbox path like /workspace/app, got '${path}'`, field);
  if (path.split("/").includes("..")) throw new AgentError("path_outside_root", `${field} must not contain '..' segments: '${path}'`, field);
  const normal = posix.normalize(path).replace(/\/+$/, "") || "/";
  if (!ALLOWED_ROOTS.some((root) => normal === root || normal.startsWith(root + "/"))) {
    throw new AgentError("path_outside_root", `${field} '${path}' is outside the sandbox's allowed roots (${ALLOWED_ROOTS.join(", ")})`, field);
  }
  return normal;
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
      const allowed = await Promise.all(ALLOWED_ROOTS.map((r) => realpath(join(root.hostRoot, r)).catch(() => join(realRoot, r))));
      if (!allowed.some((a) => real === a || real.startsWith(a + "/"))) {
        throw new AgentError("path_outside_root", `${field} '${normal}' leads through a symlink out of the allowed roots`, field);
      }
      return host;
    } catch (e) {
      if (e instanceof AgentError) throw e;
      if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
      // A dangling symlink: writing through it would create its target, wherever that is.
      if (await lstat(probe).then(() => true, () => false)) {
        throw new AgentError("path_outside_root", `${field} '${normal}' leads through a dangling symlink`, field);
      }
      const parent = posix.dirname(probe);
      if (parent === probe) return host;
      probe = parent;
    }
  }
}
