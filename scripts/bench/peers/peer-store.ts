// How the peers reach the stack's own SeaweedFS: the endpoint and keys of the stack's identities file, as the
// environment that rclone (RCLONE_CONFIG_<NAME>_* variables, no config file) and restic (its s3 backend) read.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { q, sh } from "./shell.ts";

export interface PeerStore {
  endpoint: string;
  bucket: string;
  accessKeyId: string;
  secretAccessKey: string;
}

/** The keys a private stack wrote to <stackDir>/s3/s3.json (scripts/stack/object-store-server.ts). */
export function peerStore(stackDir: string, endpoint: string, bucket: string): PeerStore {
  const file = join(stackDir, "s3", "s3.json");
  const config = JSON.parse(readFileSync(file, "utf8")) as { identities: { credentials: { accessKey: string; secretKey: string }[] }[] };
  const cred = config.identities[0]?.credentials[0];
  if (!cred) throw new Error(`${file} has no identity with credentials`);
  return { endpoint, bucket, accessKeyId: cred.accessKey, secretAccessKey: cred.secretKey };
}

/** The process environment without AWS_CA_BUNDLE: with it set, rclone refuses to start ("LoadCustomCABundleError"). */
function baseEnv(): NodeJS.ProcessEnv {
  const { AWS_CA_BUNDLE: _, ...env } = process.env;
  return env;
}

/** rclone's remote "peers:" (use as `peers:BUCKET/key`). */
export const RCLONE_REMOTE = "peers";

export function rcloneEnv(s: PeerStore): NodeJS.ProcessEnv {
  const p = `RCLONE_CONFIG_${RCLONE_REMOTE.toUpperCase()}_`;
  return {
    ...baseEnv(),
    [`${p}TYPE`]: "s3",
    [`${p}PROVIDER`]: "Other",
    [`${p}ENDPOINT`]: s.endpoint,
    [`${p}ACCESS_KEY_ID`]: s.accessKeyId,
    [`${p}SECRET_ACCESS_KEY`]: s.secretAccessKey,
    [`${p}REGION`]: "auto",
  };
}

/** restic's s3 backend on `prefix` of the bucket; the password comes from $RESTIC_PASSWORD when set. */
export function resticEnv(s: PeerStore, prefix: string, cacheDir: string): NodeJS.ProcessEnv {
  return {
    ...baseEnv(),
    RESTIC_REPOSITORY: `s3:${s.endpoint}/${s.bucket}/${prefix}`,
    RESTIC_PASSWORD: process.env.RESTIC_PASSWORD ?? "snapflow-peers-bench",
    RESTIC_CACHE_DIR: cacheDir,
    AWS_ACCESS_KEY_ID: s.accessKeyId,
    AWS_SECRET_ACCESS_KEY: s.secretAccessKey,
  };
}

/** The bytes the store holds below `prefix` of its bucket, as rclone counts them (`rclone size`). */
export async function storedBytes(s: PeerStore, prefix = ""): Promise<number> {
  const out = (await sh(`rclone size --json ${q(`${RCLONE_REMOTE}:${s.bucket}${prefix ? `/${prefix}` : ""}`)}`, { env: rcloneEnv(s) })).stdout;
  return (JSON.parse(out) as { bytes: number }).bytes;
}
