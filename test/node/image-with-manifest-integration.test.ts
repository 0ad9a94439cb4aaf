// An image backup's image and manifest from one read of the tree (container/images/image-with-manifest.ts), against real
// tar, tar2sqfs, mksquashfs, mkfs.erofs and unsquashfs: the manifest a squashfs image is built beside describes
// exactly what the image holds (extracted and compared by content), lz4 and erofs take the two-pass way and say so,
// and a failed build leaves neither image nor manifest.
import { mkdtempSync, readFileSync, rmSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { generateDataset } from "../../container/system/dataset.ts";
import { makeImageWithManifest } from "../../container/images/image-with-manifest.ts";
import { extractImage } from "../../container/images/images.ts";
import { compareManifests, takeManifest } from "../../container/manifest/manifest.ts";
import { ManifestSchema, type ImageFormat } from "../../container/contract/protocol.ts";

const work = mkdtempSync(join(tmpdir(), "snapflow-image-manifest-"));
let src: string;
beforeAll(async () => {
  src = join(work, "src");
  await generateDataset(src, { kind: "tricky", seed: 5, replace: true });
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

const cases: [string, ImageFormat, boolean][] = [
  ["squashfs zstd 3 (tar2sqfs)", { kind: "squashfs", compression: "zstd", level: 3 }, true],
  ["squashfs gzip (tar2sqfs)", { kind: "squashfs", compression: "gzip", level: 6 }, true],
  ["squashfs lz4 (two passes)", { kind: "squashfs", compression: "lz4" }, false],
  ["erofs lz4hc (two passes)", { kind: "erofs", compression: "lz4hc" }, false],
];

describe("an image and its manifest", () => {
  it.each(cases)("%s: the manifest is exactly what the image holds", async (name, format, onePass) => {
    const out = join(work, name.replace(/\W+/g, "-"));
    const r = await makeImageWithManifest(src, format, `${out}.img`, { manifestOut: `${out}.json` });
    expect(r.onePass).toBe(onePass);
    expect(r.bytes).toBeGreaterThan(0);
    const manifest = ManifestSchema.parse(JSON.parse(readFileSync(`${out}.json`, "utf8")));
    expect(r.manifest.entries).toBe(manifest.entries.length);
    // Extract the image and take its manifest by hashing every file: content, modes, mtimes, links must agree.
    const extracted = `${out}.tree`;
    // unsquashfs or fsck.erofs, as a restore runs them (erofs hard links relinked after).
    await extractImage(`${out}.img`, format, extracted);
    const c = compareManifests(manifest, await takeManifest(extracted));
    expect(c.differences).toEqual([]);
    expect(c.equal).toBe(true);
    // And the tree itself, hashed independently.
    expect(compareManifests(manifest, await takeManifest(src)).equal).toBe(true);
  });

  it("a build that fails leaves neither image nor manifest", async () => {
    const out = join(work, "fail");
    await expect(makeImageWithManifest(join(work, "no-such-dir"), cases[0]![1], `${out}.img`, { manifestOut: `${out}.json` })).rejects.toThrow();
    expect(existsSync(`${out}.img`)).toBe(false);
    expect(existsSync(`${out}.json`)).toBe(false);
  });
});
