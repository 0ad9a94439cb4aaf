// A sandbox's id and paths as requests name them (the agent confines them: sandbox-roots.ts).
// Part of the agent's protocol (../protocol.ts re-exports every part): both sides import it.
import { z } from "zod";
import { sandboxRoots } from "../sandbox-roots.ts";

export const SANDBOX_HEADER = "x-snapflow-sandbox";
export const SANDBOX_ID = z.string().regex(/^[a-z0-9][a-z0-9-]{0,62}$/, "a sandbox id is 1–63 of a-z, 0-9 and '-'");

/**
 * Checks a sandbox path's syntax and returns it normalised: absolute, no '..' segment, inside an allowed root.
 * Pure, so the Worker can refuse a bad path with a 400 before anything starts. (Symlink escapes can only be
 * seen inside the sandbox: system/path-confinement.ts checks those.)
 */
export function normalizeSandboxPath(path: string): { ok: true; path: string } | { ok: false; reason: string; outside: boolean } {
  if (path.length === 0) return { ok: false, reason: "is empty", outside: false };
  if (path.includes("\0")) return { ok: false, reason: "contains a NUL byte", outside: false };
  if (!path.startsWith("/")) return { ok: false, reason: `must be an absolute sandbox path like /workspace/app, got '${path}'`, outside: false };
  const segments = path.split("/").filter((x) => x !== "" && x !== ".");
  if (segments.includes("..")) return { ok: false, reason: `must not contain '..' segments: '${path}'`, outside: true };
  const normal = "/" + segments.join("/");
  const roots = sandboxRoots();
  if (!roots.some((root) => normal === root || normal.startsWith(root + "/"))) {
    return { ok: false, reason: `'${path}' is outside the sandbox's allowed roots (${roots.join(", ")})`, outside: true };
  }
  return { ok: true, path: normal };
}

/** A zod schema for sandbox paths: the API validates with it, so a bad path is a 400 naming the field. */
export const SandboxPath = z.string().transform((p, ctx) => {
  const r = normalizeSandboxPath(p);
  if (r.ok) return r.path;
  ctx.addIssue({ code: "custom", message: r.reason });
  return z.NEVER;
});
