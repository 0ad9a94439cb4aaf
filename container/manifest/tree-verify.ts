// Checks a tree against its expected manifest without reading content again:
//   metadata (default)  the lstat walk (tree-walk.ts) compared on type, mode, size, mtime, symlink target and
//                       hard-link grouping (and owners, when the restore kept them). Content is checked elsewhere: in the stream that fed the extractor
//                       (extract.ts), or by the image's own SHA-256 for a mount.
//   deep                every file hashed as well (takeManifest), e.g. through a mount whose image nobody hashed.
import { AgentError } from "../http/agent-error.ts";
import { compareManifests, METADATA_FIELDS, OWNER_FIELDS, takeManifest, totalsOf } from "./manifest.ts";
import type { Comparison, Manifest, ManifestEntry } from "../contract/protocol.ts";
import { walkAll } from "./tree-walk.ts";

export interface TreeCheck extends Comparison {
  totals: Manifest["totals"];
  ms: number;
  verified: { content: "walk-hash" | "not-read"; metadata: "walk"; entries: number; setidCleared?: number; owners?: "compared" | "not-in-manifest" };
}

const SETID = 0o6000;
const withoutSetid = (entries: ManifestEntry[]) => entries.map((e) => (e.mode & SETID ? { ...e, mode: e.mode & ~SETID } : e));

/**
 * A restore hands setuid/setgid bits and owners to another sandbox only when asked (`keepOwnership`). Without it
 * (`ignoreSetid`: sanitize-extracted.ts cleared the bits; mounts are nosuid) those two bits are left out of the mode
 * comparison and the answer counts the entries that had them; owners are not compared. With it, the whole mode is
 * compared, and owners too where the manifest records them (manifests made before it did: "not-in-manifest").
 */
export async function checkTree(dir: string, expected: Manifest, options: { deep?: boolean; limit?: number; ignoreSetid?: boolean; keepOwnership?: boolean } = {}): Promise<TreeCheck> {
  const started = performance.now();
  let actual: Manifest;
  if (options.deep) actual = await takeManifest(dir);
  else {
    const entries: ManifestEntry[] = (await walkAll(dir)).map(({ stat: _stat, socket: _socket, ...e }) => e);
    actual = { version: 1, entries, totals: totalsOf(entries) };
  }
  const setidCleared = options.ignoreSetid && !options.keepOwnership ? expected.entries.filter((e) => e.type === "file" && e.mode & SETID).length : 0;
  if (setidCleared) {
    expected = { ...expected, entries: withoutSetid(expected.entries) };
    actual = { ...actual, entries: withoutSetid(actual.entries) };
  }
  const fields = [...(options.deep ? [...METADATA_FIELDS, "sha256" as const] : METADATA_FIELDS), ...(options.keepOwnership ? OWNER_FIELDS : [])];
  const comparison = compareManifests(expected, actual, options.limit ?? 20, fields);
  const owners = options.keepOwnership ? { owners: expected.entries.some((e) => e.uid !== undefined) ? "compared" as const : "not-in-manifest" as const } : {};
  return {
    ...comparison,
    totals: actual.totals,
    ms: Math.round(performance.now() - started),
    verified: { content: options.deep ? "walk-hash" : "not-read", metadata: "walk", entries: actual.entries.length, ...(setidCleared ? { setidCleared } : {}), ...owners },
  };
}

/** "a/b: sha256 expected 1f… got 9c…; c: missing" — the first differences, for an error message. */
export function describeDifferences(c: Comparison, max = 5): string {
  const parts = c.differences.slice(0, max).map((d) =>
    d.kind === "changed" ? `${d.path}: ${d.fields!.map((f) => `${f.name} expected ${JSON.stringify(f.expected)} got ${JSON.stringify(f.actual)}`).join(", ")}` : `${d.path}: ${d.kind}`,
  );
  const total = c.counts.missing + c.counts.extra + c.counts.changed;
  return `${total} difference(s) (${c.counts.changed} changed, ${c.counts.missing} missing, ${c.counts.extra} extra): ${parts.join("; ")}`;
}

export function verifyFailed(what: string, c: Comparison): AgentError {
  return new AgentError("verify_failed", `${what} does not match its manifest: ${describeDifferences(c)}`);
}
