// The restore target must be empty unless the caller asked to replace it.
import { SnapflowError } from "../errors.ts";
import type { RestoreContext } from "./restore-context.ts";

export async function checkTarget({ p, agent }: RestoreContext): Promise<void> {
  const target = await agent.stat(p.path);
  if (target.exists && (target.type !== "dir" || (target.entries ?? 0) > 0) && !p.replace) {
    throw new SnapflowError("target_not_empty", `restore target ${p.path} in sandbox ${p.sandboxId} is not empty; pass replace: true to overwrite it`, { field: "replace" });
  }
}
