// extract: tar x of a staged tar archive; unsquashfs or fsck.erofs --extract of a staged image. The staged file
// is removed afterwards: the extracted tree no longer needs it.
import { since } from "../../phases/phase-runner.ts";
import { sandboxPaths } from "../../sandbox/sandbox-paths.ts";
import { filesSnapshot, packUrls } from "../files-packs.ts";
import { signedChain } from "../../snapshots/index-chain.ts";
import type { Materialization } from "./materialization.ts";

export const extractMaterialization: Materialization = {
  mounts: false,
  keeps: "tree",
  async materialize(c, staged, format, expected, dir) {
    const { agent, p } = c;
    const t = performance.now();
    // The file-level format: the staged file is the index (its SHA-256 checked on arrival); the engine makes the tree
    // from the packs it names, every chunk checked against its SHA-256 before it is written, every file against its
    // entry. Its own metadata walk is left out: verify walks the tree against the manifest next.
    if (format.kind === "files") {
      const record = await filesSnapshot(c, c.p.snapshotId);
      const index = { file: staged, sha256: record.archive.sha256, ...(await signedChain(c.d.presigner, record.files.chain)) };
      const made = await agent.filesUnpack({ path: dir, index, packs: packUrls(c, record), keepOwners: p.keepOwnership ?? false, walk: true,
        // A stored manifest (snapshots from before manifests were made from the index) must agree with the index before
        // anything is made; then each file is checked against its entry as it is written, and the engine walks what it
        // made: the manifest's tree, checked in the stream.
        ...(record.manifest.sha256 && !record.manifest.fromIndex ? { manifest: { url: await c.d.presigner.url(record.manifest.key, "GET"), sha256: record.manifest.sha256 } } : {}),
        // The made tree's stat keys, kept beside the kept indexes: the next file-level backup here reads only what changed.
        statsOut: sandboxPaths.filesStats(record.id) }, record.manifest.bytes);
      await agent.deleteFile(staged).catch(() => {});
      // A manifest made from the index says what the index says: the walk against the index is the walk against it.
      const verified = !made.walked ? undefined
        : record.manifest.fromIndex ? { content: "each chunk and file against the index, which the manifest is made from", metadata: "walk" }
        : made.manifestAgreed ? { content: "each chunk and file against the index, the index against the manifest", metadata: "walk" } : undefined;
      return { ms: since(t), bytes: made.bytes, how: "files-unpack", chunks: made.chunks, requests: made.requests, fetchedBytes: made.fetchedBytes, engineMs: made.ms, ...(verified ? { verified } : {}) };
    }
    // A tar archive is checked entry by entry on its way into tar, then by a metadata walk; an extracted image's
    // content is vouched for by the image's SHA-256 (checked on arrival) and gets the metadata walk in verify.
    const done = format.kind === "tar"
      ? await agent.extractFile({ archive: staged, path: dir, format, expected, complete: true, keepOwnership: p.keepOwnership })
      : await agent.materialize({ archive: staged, path: dir, format, how: "extract", keepOwnership: p.keepOwnership });
    await agent.deleteFile(staged).catch(() => {});
    return { ms: since(t), bytes: done.bytes, ...(format.kind === "tar" ? {} : { how: "extract" }), ...("verified" in done ? { verified: done.verified } : {}) };
  },
  async undo() {},
};
