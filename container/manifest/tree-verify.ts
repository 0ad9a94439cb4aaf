// Checks a tree against its expected manifest without reading content again:
//   metadata (default)  the lstat walk (tree-walk.ts) compared on type, mode, size, mtime, symlink target and
//                       hard-link grouping (and owners, when the restore kept them). Content is checked elsewhere: in the stream that fed the extractor
//                       (extract.ts), or by the image's own SHA-256 for a mount.
//   deep                every file hashed as well (takeManifest), e.g. through a mount whose image nobody hashed.
// Sparse files (a manifest entry with `holes`) are checked in both: a restored file must have at least half of its
// holes unallocated (st_blocks). Half, because filesystems allocate whole blocks — a data region's first and last
// block are allocated whole, and an image format's block can be 128 KiB or 1 MiB (squashfs) — while a file that came
// back dense has none of its holes, so the check tells the two apart whatever the block size. A materialization
// that cannot report holes (a FUSE mount that answers full blocks: the registry's `fidelity`) passes `sparse: false`.
import { AgentError } from "../http/agent-error.ts";
import { join } from "node:path";
import { hashFile, METADATA_FIELDS, OWNER_FIELDS } from "./manifest.ts";
import { readerOf, type ManifestReader } from "./manifest-file.ts";
import { SortedMatch } from "./sorted-match.ts";
import { walkOrder } from "./manifest-layer.ts";
import type { Comparison, Difference, Manifest } from "../contract/protocol.ts";
import { walkTree, type WalkEntry } from "./tree-walk.ts";

export interface TreeCheck extends Comparison {
  totals: Manifest["totals"];
  ms: number;
  verified: { content: "walk-hash" | "hashes-of-one-read" | "not-read"; metadata: "walk" | "the-pass-walk"; entries: number; setidCleared?: number; owners?: "compared" | "not-in-manifest"; sparse?: "compared" | "not-compared" };
}

/** Below this a hole is block rounding, not sparseness (manifest.ts holesOf). */
const HOLE_TOLERANCE = 64 * 1024;

/** The sparse files of `expected` that came back with fewer than half their holes unallocated. */
export function denseWhereSparse(expected: Manifest, allocated: Map<string, { size: number; allocated: number }>): Difference[] {
  const out: Difference[] = [];
  for (const want of expected.entries) {
    if (!want.holes || want.holes <= HOLE_TOLERANCE || want.link) continue;
    const got = allocated.get(want.path);
    if (!got) continue; // missing: the comparison names it
    const unallocated = Math.max(0, got.size - got.allocated);
    if (unallocated < want.holes / 2) out.push({ path: want.path, kind: "changed", fields: [{ name: "holes", expected: want.holes, actual: unallocated }] });
  }
  return out;
}

const SETID = 0o6000;

/** The walk, each file hashed (a few at a time, answered in walk order): a deep check's actual side. */
async function* hashedWalk(dir: string): AsyncGenerator<WalkEntry & { sha256?: string }> {
  const queue: Promise<WalkEntry & { sha256?: string }>[] = [];
  for await (const e of walkTree(dir)) {
    const next = e.type === "file" && e.link === undefined ? hashFile(join(dir, e.path), e.size).then((sha256) => ({ ...e, sha256 })) : Promise.resolve(e);
    // Awaited in turn below: marked handled now, or a read that fails meanwhile is an unhandled rejection.
    next.catch(() => {});
    queue.push(next);
    if (queue.length >= HASH_AHEAD) yield await queue.shift()!;
  }
  while (queue.length) yield await queue.shift()!;
}
const HASH_AHEAD = 16;

/**
 * The walk, each file given the SHA-256 that `hashes` (a manifest of this tree, in walk order) names for its path:
 * a deep check's actual side without a second read. A file `hashes` does not name has none, and so differs.
 */
async function* walkHashedBy(dir: string, hashes: ManifestReader): AsyncGenerator<WalkEntry & { sha256?: string }> {
  const named = (async function* () {
    for await (const batch of hashes.batches()) yield* batch;
  })();
  let at = await named.next();
  for await (const e of walkTree(dir)) {
    if (e.type !== "file" || e.link !== undefined) {
      yield e;
      continue;
    }
    while (!at.done && walkOrder(at.value.path, e.path) < 0) at = await named.next();
    yield !at.done && at.value.path === e.path && at.value.sha256 ? { ...e, sha256: at.value.sha256 } : e;
  }
}

/**
 * The entries of `hashes`, a manifest of this tree made by the pass that walked it moments ago, as the walk would
 * answer them (a sparse file's unallocated bytes: its holes): the actual side without walking the tree again.
 */
async function* manifestAsWalk(hashes: ManifestReader): AsyncGenerator<WalkEntry & { sha256?: string }> {
  for await (const batch of hashes.batches()) {
    for (const { holes, stat, ...e } of batch) {
      yield { ...e, stat: stat ?? { ino: "0", dev: "0", mtimeNs: "0", ctimeNs: "0" }, ...(e.type === "file" && !e.link ? { allocated: e.size - (holes ?? 0) } : {}) };
    }
  }
}

const asReader = (expected: Manifest | ManifestReader): ManifestReader => ("batches" in expected ? expected : readerOf(expected));

/**
 * A restore hands setuid/setgid bits and owners to another sandbox only when asked (`keepOwnership`). Without it
 * (`ignoreSetid`: sanitize-extracted.ts cleared the bits; mounts are nosuid) those two bits of a file the manifest
 * gives them are left out of the mode comparison and the answer counts such files; owners are not compared. With
 * it, the whole mode is compared, and owners too where the manifest records them (manifests made before it did:
 * "not-in-manifest").
 *
 * The walk and the manifest are read as streams and merged in walk order (sorted-match.ts): the agent holds
 * neither, whatever the number of entries.
 */
export async function checkTree(dir: string, expected: Manifest | ManifestReader, options: { deep?: boolean; hashes?: ManifestReader; fromHashes?: boolean; limit?: number; ignoreSetid?: boolean; keepOwnership?: boolean; sparse?: boolean } = {}): Promise<TreeCheck> {
  const started = performance.now();
  const limit = options.limit ?? 20;
  const sparse = options.sparse ?? true;
  const ignoreSetid = options.ignoreSetid && !options.keepOwnership;
  const compared = [...(options.deep ? [...METADATA_FIELDS, "sha256" as const] : METADATA_FIELDS), ...(options.keepOwnership ? OWNER_FIELDS : [])];
  const differences: Difference[] = [];
  const counts = { missing: 0, extra: 0, changed: 0 };
  const note = (d: Difference) => {
    counts[d.kind]++;
    if (differences.length < limit) differences.push(d);
  };
  const seen = { setidCleared: 0, owners: false, holes: false };
  const wanted = (async function* () {
    for await (const batch of asReader(expected).batches()) {
      for (const e of batch) {
        if (ignoreSetid && e.type === "file" && e.mode & SETID) seen.setidCleared++;
        if (e.uid !== undefined) seen.owners = true;
        if (e.holes) seen.holes = true;
      }
      yield batch;
    }
  })();
  const dense: Difference[] = [];
  const match = new SortedMatch<WalkEntry & { sha256?: string }>(wanted, {
    pair(want, got) {
      if (ignoreSetid && want.type === "file" && want.mode & SETID) {
        want = { ...want, mode: want.mode & ~SETID };
        got = { ...got, mode: got.mode & ~SETID };
      }
      const fields = compared.filter((name) => !(name === "mtime" && want.type === "symlink") && !(OWNER_FIELDS.includes(name) && want[name] === undefined))
        .filter((name) => want[name] !== (got as unknown as Record<string, unknown>)[name])
        .map((name) => ({ name, expected: want[name], actual: (got as unknown as Record<string, unknown>)[name] }));
      if (fields.length) note({ path: want.path, kind: "changed", fields });
      if (sparse && got.allocated !== undefined && want.holes) {
        for (const d of denseWhereSparse({ version: 1, entries: [want], totals: { files: 0, dirs: 0, symlinks: 0, bytes: 0 } }, new Map([[got.path, { size: got.size, allocated: got.allocated }]]))) {
          counts.changed++;
          if (dense.length < limit) dense.push(d);
        }
      }
    },
    missing: (want) => note({ path: want.path, kind: "missing" }),
    extra: (got) => note({ path: got.path, kind: "extra" }),
  });
  const totals = { files: 0, dirs: 0, symlinks: 0, bytes: 0 };
  let entries = 0;
  const actual = options.fromHashes && options.hashes ? manifestAsWalk(options.hashes) : options.deep ? (options.hashes ? walkHashedBy(dir, options.hashes) : hashedWalk(dir)) : walkTree(dir);
  for await (const { stat: _stat, socket: _socket, ...got } of actual) {
    entries++;
    if (got.type === "file") {
      totals.files++;
      if (!got.link) totals.bytes += got.size;
    } else if (got.type === "dir") totals.dirs++;
    else if (got.type === "symlink") totals.symlinks++;
    const reading = match.add(got as WalkEntry);
    if (reading) await reading;
  }
  await match.finish();
  differences.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  // As before: the sparse findings follow the sorted differences, within the limit.
  for (const d of dense) if (differences.length < limit) differences.push(d);
  const owners = options.keepOwnership ? { owners: seen.owners ? "compared" as const : "not-in-manifest" as const } : {};
  return {
    equal: counts.missing + counts.extra + counts.changed === 0,
    counts,
    differences,
    totals,
    ms: Math.round(performance.now() - started),
    verified: { content: options.deep ? (options.hashes ? "hashes-of-one-read" : "walk-hash") : "not-read", metadata: options.fromHashes && options.hashes ? "the-pass-walk" : "walk", entries, ...(seen.setidCleared ? { setidCleared: seen.setidCleared } : {}), ...owners, ...(seen.holes ? { sparse: sparse ? "compared" as const : "not-compared" as const } : {}) },
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
