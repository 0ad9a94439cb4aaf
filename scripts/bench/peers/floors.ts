// The floors: what the bytes cost with nothing but the standard tools. Backup: `tar | zstd -T0 -3` to a file,
// and the same piped into `rclone rcat` (a plain streaming multipart upload) into the stack's own store.
// Restore: `rclone cat | zstd -d | tar x` into a fresh directory, then `sync` (the bytes on disk, not in the
// page cache: a restore is done when it survives a crash).
import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { RCLONE_REMOTE, rcloneEnv, type PeerStore } from "./peer-store.ts";
import { q, sh } from "./shell.ts";

export const FLOOR_COMMANDS = {
  "floor-file": "tar -C DIR -cf - . | zstd -T0 -3 -q > FILE",
  "floor-store": "tar -C DIR -cf - . | zstd -T0 -3 -q | rclone rcat peers:BUCKET/KEY",
  "floor-restore": "rclone cat peers:BUCKET/KEY | zstd -d -q | tar -C FRESH -xf - && sync",
} as const;

export function floors(store: PeerStore, scratch: string) {
  const env = rcloneEnv(store);
  const remote = (key: string) => `${RCLONE_REMOTE}:${store.bucket}/${key}`;
  return {
    async toFile(dir: string, run: number): Promise<number> {
      const file = join(scratch, `floor-${run}.tar.zst`);
      const { ms } = await sh(`tar -C ${q(dir)} -cf - . | zstd -T0 -3 -q > ${q(file)}`);
      rmSync(file, { force: true });
      return ms;
    },
    async toStore(dir: string, key: string): Promise<number> {
      return (await sh(`tar -C ${q(dir)} -cf - . | zstd -T0 -3 -q | rclone -q rcat ${q(remote(key))}`, { env })).ms;
    },
    /** restores `key` into a fresh directory, then removes it (untimed) */
    async restore(key: string, run: number): Promise<number> {
      const fresh = join(scratch, `floor-restore-${run}`);
      rmSync(fresh, { recursive: true, force: true });
      mkdirSync(fresh, { recursive: true });
      const { ms } = await sh(`rclone -q cat ${q(remote(key))} | zstd -d -q | tar -C ${q(fresh)} -xf - && sync`, { env });
      rmSync(fresh, { recursive: true, force: true });
      return ms;
    },
    /** multipart uploads left open in the bucket, by anyone (rclone or snapflow): there should be none */
    async openUploads(): Promise<string[]> {
      const { stdout } = await sh(`rclone -q backend list-multipart-uploads ${q(`${RCLONE_REMOTE}:${store.bucket}`)}`, { env });
      const byBucket = JSON.parse(stdout || "{}") as Record<string, { Key?: string }[] | null>;
      return Object.values(byBucket).flatMap((uploads) => (uploads ?? []).map((u) => u.Key ?? "?"));
    },
  };
}
