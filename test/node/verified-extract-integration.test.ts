// Restores verified as the bytes arrive (container/extract/extract.ts with an expected manifest) against real tar and
// zstd: a good archive passes with content checked in the stream and metadata by a walk; a flipped byte, a
// truncated archive, and an archive that disagrees with its manifest each fail naming what is wrong. Then the
// metadata-only tree check (container/manifest/tree-verify.ts) and its deep variant.
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync, createReadStream } from "node:fs";
import { execFileSync } from "node:child_process";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { archiveWithManifestToFile } from "../../container/archive/archive.ts";
import { generateDataset } from "../../container/system/dataset.ts";
import { extractFromFile, extractFromStream } from "../../container/extract/extract.ts";
import { ManifestSchema, type Manifest, type TarFormat } from "../../container/contract/protocol.ts";
import { checkTree } from "../../container/manifest/tree-verify.ts";
import { readerOf } from "../../container/manifest/manifest-file.ts";
import { extractSafely } from "../../container/extract/safe-extract.ts";

const work = mkdtempSync(join(tmpdir(), "snapflow-verified-extract-"));
const zstd: TarFormat = { kind: "tar", compression: "zstd" };
const plain: TarFormat = { kind: "tar", compression: "none" };
let src: string;
let manifest: Manifest;
let n = 0;
const fresh = () => join(work, `out-${++n}`);

beforeAll(async () => {
  src = join(work, "src");
  await generateDataset(src, { kind: "tricky", seed: 3, replace: true });
  await archiveWithManifestToFile(src, zstd, join(work, "a.tar.zst"), { manifestOut: join(work, "m.json") });
  await archiveWithManifestToFile(src, plain, join(work, "a.tar"), { manifestOut: join(work, "m-plain.json") });
  manifest = ManifestSchema.parse(JSON.parse(readFileSync(join(work, "m.json"), "utf8")));
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe("extract with an expected manifest", () => {
  it.each([["zstd", zstd, "a.tar.zst"], ["none", plain, "a.tar"]] as const)("%s: content checked in the stream, metadata by a walk; the stored object's size and SHA-256 answered", async (_name, format, file) => {
    const r = await extractFromFile(join(work, file), format, fresh(), { expected: manifest });
    expect(r).toMatchObject({ equal: true, bytes: statSync(join(work, file)).size, verified: { content: "in-stream", entries: manifest.entries.length, metadata: "walk", walked: manifest.entries.length } });
  });

  // tar stops reading at the end-of-archive blocks and may exit before the padding after them was written (blocked
  // archives end in zeros; 4 MiB of them here, more than a pipe holds): that is not a failure, and the SHA-256
  // still covers every byte received.
  it.each([["verified", true], ["unverified", false]] as const)("%s: zero padding that tar never reads after its end-of-archive blocks is hashed, not an error", async (_name, verified) => {
    const padded = join(work, `padded-${verified}.tar`);
    const bytes = Buffer.concat([readFileSync(join(work, "a.tar")), Buffer.alloc(4 << 20)]);
    writeFileSync(padded, bytes);
    const sha256 = (await import("node:crypto")).createHash("sha256").update(bytes).digest("hex");
    const r = verified ? await extractFromFile(padded, plain, fresh(), { expected: manifest }) : await extractFromStream(createReadStream(padded), plain, fresh());
    expect(r).toMatchObject({ bytes: bytes.length, sha256 });
  });

  it("a flipped byte inside a file's content fails naming the file", async () => {
    const tar = readFileSync(join(work, "a.tar"));
    // Not the sparse file: its data in the archive is a few bytes after a map.
    const big = manifest.entries.find((e) => e.type === "file" && e.size > 50_000 && !e.holes)!;
    // The file's content follows its header (named ./path, after any pax header of its own); flip a byte well inside it.
    const at = tar.indexOf(Buffer.from(`./${big.path}\0`)) + 512 + 30_000;
    tar[at] ^= 0xff;
    const bad = join(work, "flipped.tar");
    writeFileSync(bad, tar);
    await expect(extractFromFile(bad, plain, fresh(), { expected: manifest })).rejects.toMatchObject({ code: "verify_failed", message: expect.stringContaining(`${big.path}: sha256 expected`) });
  });

  it("a flipped byte in the compressed archive fails (zstd's own checksum or the entry hashes)", async () => {
    const zst = readFileSync(join(work, "a.tar.zst"));
    zst[Math.floor(zst.length / 2)] ^= 0xff;
    const bad = join(work, "flipped.tar.zst");
    writeFileSync(bad, zst);
    await expect(extractFromFile(bad, zstd, fresh(), { expected: manifest })).rejects.toMatchObject({ code: expect.stringMatching(/^(tool_failed|verify_failed)$/) });
  });

  it("a truncated archive fails", async () => {
    const zst = readFileSync(join(work, "a.tar.zst"));
    const bad = join(work, "short.tar.zst");
    writeFileSync(bad, zst.subarray(0, Math.floor(zst.length * 0.7)));
    await expect(extractFromStream(createReadStream(bad), zstd, fresh(), { expected: manifest })).rejects.toMatchObject({ code: "tool_failed" });
  });

  it("an archive whose content disagrees with its manifest fails naming the entry and the field", async () => {
    const lying: Manifest = structuredClone(manifest);
    const victim = lying.entries.find((e) => e.type === "file" && e.sha256)!;
    victim.sha256 = "0".repeat(64);
    const symlink = lying.entries.find((e) => e.type === "symlink")!;
    symlink.target = "elsewhere";
    lying.entries.push({ path: "zz-never-archived", type: "file", mode: 0o644, size: 1, mtime: 0, sha256: "1".repeat(64) });
    const err = await extractFromFile(join(work, "a.tar.zst"), zstd, fresh(), { expected: lying }).catch((e) => e);
    expect(err).toMatchObject({ code: "verify_failed", status: 422 });
    expect(err.message).toContain(`${victim.path}: sha256 expected "${"0".repeat(64)}"`);
    expect(err.message).toContain(`${symlink.path}: target expected "elsewhere"`);
    expect(err.message).toContain("zz-never-archived: missing");
  });

  it("a GNU sparse archive (tar --sparse, as the seed-era archivers make) is verified too: its sparse file hashed from disk", async () => {
    const sparseTar = join(work, "sparse.tar");
    execFileSync("tar", ["--numeric-owner", "--sparse", "-C", src, "-cf", sparseTar, "."]);
    // Holes not stored: the 8 MiB sparse file travels as a GNU sparse entry, which node-tar does not decode.
    expect(statSync(sparseTar).size).toBeLessThan(4 * 1024 * 1024);
    const ok = await extractFromFile(sparseTar, plain, fresh(), { expected: manifest });
    expect(ok).toMatchObject({ equal: true, verified: { content: "in-stream", metadata: "walk" } });
    const lying: Manifest = structuredClone(manifest);
    lying.entries.find((e) => e.path === "sparse.img")!.sha256 = "0".repeat(64);
    await expect(extractFromFile(sparseTar, plain, fresh(), { expected: lying })).rejects.toMatchObject({ code: "verify_failed", message: expect.stringContaining("sparse.img: sha256 expected") });
  });

  it("a setuid file restores without its setuid bit, and the restore still verifies (the bit is never carried over)", async () => {
    const tree = join(work, "suid-src");
    mkdirSync(tree);
    writeFileSync(join(tree, "tool"), "#!/bin/sh\n");
    chmodSync(join(tree, "tool"), 0o4755);
    const suidTar = join(work, "suid.tar");
    const made = await archiveWithManifestToFile(tree, plain, suidTar, { manifestOut: join(work, "suid.json") });
    const expected = ManifestSchema.parse(JSON.parse(readFileSync(join(work, "suid.json"), "utf8")));
    expect(expected.entries.find((e) => e.path === "tool")!.mode).toBe(0o4755);
    const out = fresh();
    const r = await extractSafely(out, { expected }, (into, v) => extractFromFile(suidTar, plain, into, v));
    expect(statSync(join(out, "tool")).mode & 0o7777).toBe(0o755);
    expect((r as any).verified).toMatchObject({ metadata: "walk", walked: made.manifest.entries });
    // Without the setuid exception the walk would have reported the mode.
    const strict = await checkTree(out, expected);
    expect(strict.differences[0]).toMatchObject({ path: "tool", fields: [{ name: "mode", expected: 0o4755, actual: 0o755 }] });
    expect((await checkTree(out, expected, { ignoreSetid: true })).verified.setidCleared).toBe(1);
  });

  it("a delta layer (complete: false) checks the entries it holds and leaves the walk for later", async () => {
    const more: Manifest = { ...manifest, entries: [...manifest.entries, { path: "in-another-layer", type: "file", mode: 0o644, size: 1, mtime: 0, sha256: "1".repeat(64) }] };
    const r = await extractFromFile(join(work, "a.tar.zst"), zstd, fresh(), { expected: more, complete: false });
    expect(r).toMatchObject({ equal: true, verified: { content: "in-stream", metadata: "not-walked" } });
  });
});

describe("checkTree", () => {
  it("metadata only: catches a mode, an mtime and a missing entry without reading content; deep also catches content", async () => {
    const out = fresh();
    await extractFromFile(join(work, "a.tar.zst"), zstd, out, { expected: manifest });
    expect(await checkTree(out, manifest)).toMatchObject({ equal: true, verified: { content: "not-read", metadata: "walk" } });
    const file = manifest.entries.find((e) => e.type === "file" && !e.link && e.size > 0 && e.mode === 0o644)!;
    // Same size, same mtime, other content: only a deep check can see it.
    const p = join(out, file.path);
    const st = statSync(p);
    const body = readFileSync(p);
    body[0] ^= 0xff;
    writeFileSync(p, body);
    utimesSync(p, st.atime, st.mtime);
    expect((await checkTree(out, manifest)).equal).toBe(true);
    expect(await checkTree(out, manifest, { deep: true })).toMatchObject({ equal: false, verified: { content: "walk-hash" }, differences: [{ path: file.path, kind: "changed", fields: [{ name: "sha256" }] }] });
    chmodSync(p, 0o600);
    expect((await checkTree(out, manifest)).differences).toEqual([{ path: file.path, kind: "changed", fields: [{ name: "mode", expected: 0o644, actual: 0o600 }] }]);
  });

  it("deep with hashes (a compaction's check): each file's SHA-256 is the given manifest's, not read again; a hash it lacks or gives otherwise differs", async () => {
    const out = fresh();
    await extractFromFile(join(work, "a.tar.zst"), zstd, out, { expected: manifest });
    const files = manifest.entries.filter((e) => e.type === "file" && !e.link && e.sha256);
    expect(files.length).toBeGreaterThan(2);
    expect(await checkTree(out, manifest, { deep: true, hashes: readerOf(manifest) })).toMatchObject({ equal: true, verified: { content: "hashes-of-one-read" } });
    // The content on disk is not read: a flipped byte that the given hashes do not know of passes (the image's
    // single pass that made them read the bytes; this is what it saw).
    const [a, b] = files;
    const p = join(out, a!.path);
    const st = statSync(p);
    const body = readFileSync(p);
    body[0] ^= 0xff;
    writeFileSync(p, body);
    utimesSync(p, st.atime, st.mtime);
    expect((await checkTree(out, manifest, { deep: true, hashes: readerOf(manifest) })).equal).toBe(true);
    // The given hashes differ from the expected for one file, and lack another: both named.
    const given = { ...manifest, entries: manifest.entries.filter((e) => e.path !== b!.path).map((e) => (e.path === a!.path ? { ...e, sha256: "0".repeat(64) } : e)) };
    const r = await checkTree(out, manifest, { deep: true, hashes: readerOf(given) });
    expect(r.equal).toBe(false);
    expect(r.differences.map((x) => [x.path, x.fields?.map((f) => f.name)])).toEqual([[a!.path, ["sha256"]], [b!.path, ["sha256"]]].sort((x, y) => (x[0]! < y[0]! ? -1 : 1)));
  });
});
