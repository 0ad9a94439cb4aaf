// A backup's manifest is the sandbox's making, and every restore of the snapshot reads it (the agent holds it in
// memory to check the tree): a tree of 2.5 M entries made a 561 MB manifest that was recorded good and grew the
// restoring agent to 1.8 GB (issue 21). So a manifest is measured before it is stored, by what the Worker itself
// sees (the bytes it moves to the store, the entries it parses or is told), and refused over the deployment's
// bounds (config.ts MAX_MANIFEST_BYTES, MAX_MANIFEST_ENTRIES; container/contract/manifest-limits.ts has the defaults).
import type { Config } from "../config.ts";
import { SnapflowError } from "../errors.ts";
import type { BackupParams } from "./backup-params.ts";
import { readBodyBounded } from "../../container/contract/bounded-body.ts";

export function checkManifestBounds(config: Pick<Config, "MAX_MANIFEST_BYTES" | "MAX_MANIFEST_ENTRIES">, p: Pick<BackupParams, "sandboxId" | "path">, m: { bytes: number; entries?: number }): void {
  const over = [
    m.bytes > config.MAX_MANIFEST_BYTES ? `${m.bytes} bytes (MAX_MANIFEST_BYTES is ${config.MAX_MANIFEST_BYTES})` : "",
    m.entries !== undefined && m.entries > config.MAX_MANIFEST_ENTRIES ? `${m.entries} entries (MAX_MANIFEST_ENTRIES is ${config.MAX_MANIFEST_ENTRIES})` : "",
  ].filter(Boolean);
  if (!over.length) return;
  throw new SnapflowError(
    "manifest_too_large",
    `the manifest of ${p.path} in sandbox ${p.sandboxId} has ${over.join(" and ")}; leave paths out with the backup's excludes (--exclude), or raise the limit in the deployment's vars`,
    { field: "path" },
  );
}

/** A manifest the agent streams (a walk's), read as text but never past MAX_MANIFEST_BYTES: the Worker has 128 MB. */
export async function readManifestBounded(config: Pick<Config, "MAX_MANIFEST_BYTES" | "MAX_MANIFEST_ENTRIES">, p: Pick<BackupParams, "sandboxId" | "path">, r: Response): Promise<{ text: string; bytes: number }> {
  const got = await readBodyBounded(r, config.MAX_MANIFEST_BYTES);
  if ("over" in got) checkManifestBounds(config, p, { bytes: got.over });
  const { bytes } = got as { bytes: Uint8Array };
  return { text: new TextDecoder().decode(bytes), bytes: bytes.byteLength };
}
