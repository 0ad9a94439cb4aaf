// The roots a sandbox path may live under, as configuration. Both sides hold the same list: the Worker from its
// SANDBOX_ROOTS variable (src/config.ts, before any request is validated) and the agent from SNAPFLOW_SANDBOX_ROOTS
// at start (agent.ts; the Worker passes it when it starts the agent). Default: what the Sandbox SDK's own backups
// allow. snapflow's own area (/snapflow) is always a root of the agent's and never a configured one.
//
// A configured root is refused when it is not an absolute, normal path, when it is `/` (everything) or inside
// (or above) /proc, /sys or /dev (the kernel's, not a workspace), or when it is or holds /snapflow. Paths below a
// root are then checked by protocol.ts (syntax, '..') and system/path-confinement.ts (symlinks that lead out of every root).
import { AGENT_AREA, DEFAULT_USER_ROOTS } from "./sandbox-layout.ts";

/** Never a root, nor below or above one of these (except "/" itself, which is above everything). */
const KERNEL_ROOTS = ["/proc", "/sys", "/dev"];

const within = (path: string, root: string) => root === "/" || path === root || path.startsWith(root + "/");

/** Checks one configured root; the reason says what is wrong with it. */
export function checkRoot(root: string): string | null {
  if (!root.startsWith("/")) return `'${root}' is not an absolute path`;
  if (root.includes("\0")) return `'${root}' contains a NUL byte`;
  if (root === "/") return "'/' would allow the whole filesystem";
  if (root.slice(1).split("/").some((s) => s === "" || s === "." || s === "..")) return `'${root}' is not a normal path (no '.', '..', '//' or trailing '/')`;
  const kernel = KERNEL_ROOTS.find((k) => within(root, k) || within(k, root));
  if (kernel) return `'${root}' is or holds ${kernel}, the kernel's, not a workspace`;
  if (within(root, AGENT_AREA) || within(AGENT_AREA, root)) return `'${root}' is or holds ${AGENT_AREA}, snapflow's own area`;
  return null;
}

/** A comma-separated list of roots (SANDBOX_ROOTS, SNAPFLOW_SANDBOX_ROOTS); empty or absent: the defaults. */
export function parseRoots(text: string | undefined): { ok: true; roots: string[] } | { ok: false; reason: string } {
  const roots = (text ?? "").split(",").map((r) => r.trim()).filter(Boolean);
  if (!roots.length) return { ok: true, roots: [...DEFAULT_USER_ROOTS] };
  for (const r of roots) {
    const reason = checkRoot(r);
    if (reason) return { ok: false, reason };
  }
  return { ok: true, roots: [...new Set(roots)] };
}

let userRoots: readonly string[] = DEFAULT_USER_ROOTS;

/** Sets the configured roots (once, at start; the Worker's config is the same for every request). */
export function useSandboxRoots(roots: readonly string[]): void {
  userRoots = [...roots];
}

/** The roots a caller may name. */
export const configuredRoots = (): readonly string[] => userRoots;

/** Every root a sandbox path may be under: the configured ones and snapflow's own area. */
export const sandboxRoots = (): readonly string[] => [...userRoots, AGENT_AREA];
