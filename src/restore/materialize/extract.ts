// extract: tar x of a staged tar archive; unsquashfs or fsck.erofs --extract of a staged image. The staged file
// is removed afterwards: the extracted tree no longer needs it.
import { since } from "../../phases/phase-runner.ts";
import type { Materialization } from "./materialization.ts";

export const extractMaterialization: Materialization = {
  mounts: false,
  keeps: "tree",
  async materialize({ agent, p }, staged, format, expected, dir) {
    const t = performance.now();
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
