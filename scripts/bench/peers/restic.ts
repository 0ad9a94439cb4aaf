// restic, the peer a user would pick instead, with its s3 backend on the stack's own store: a first backup into a
// fresh repository, a backup after the 10 MB change (its parent: the first), and a restore of the first snapshot
// into a fresh directory, then `sync` as for the floor. `restic init` is set-up, not timed. The snapshot's
// paths are relative (`restic backup .` from inside the tree), so a restore lands the tree at the target's top.
import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { resticEnv, type PeerStore } from "./peer-store.ts";
import { q, sh } from "./shell.ts";

export const RESTIC_COMMANDS = {
  "restic-first": "cd DIR && restic backup --host snapflow-peers --json . (fresh repository)",
  "restic-incremental": "cd DIR && restic backup --host snapflow-peers --parent FIRST --json .",
  "restic-restore": "restic restore FIRST --target FRESH && sync",
} as const;

export function resticRepo(store: PeerStore, prefix: string, scratch: string) {
  const env = resticEnv(store, prefix, join(scratch, "restic-cache"));
  const backup = async (dir: string, parent?: string): Promise<{ ms: number; snapshotId: string; summary: Record<string, unknown> }> => {
    const { ms, stdout } = await sh(`restic backup --host snapflow-peers --json${parent ? ` --parent ${q(parent)}` : ""} .`, { cwd: dir, env });
    const summary = stdout.trim().split("\n").map((l) => JSON.parse(l) as Record<string, unknown>).find((m) => m.message_type === "summary");
    if (!summary || typeof summary.snapshot_id !== "string") throw new Error(`restic backup printed no summary with a snapshot_id:\n${stdout.slice(-500)}`);
    return { ms, snapshotId: summary.snapshot_id, summary };
  };
  return {
    init: () => sh("restic init -q", { env }),
    backup,
    async restore(snapshotId: string, fresh: string): Promise<number> {
      rmSync(fresh, { recursive: true, force: true });
      mkdirSync(fresh, { recursive: true });
      const { ms } = await sh(`restic restore -q ${q(snapshotId)} --target ${q(fresh)} && sync`, { env });
      return ms;
    },
  };
}
