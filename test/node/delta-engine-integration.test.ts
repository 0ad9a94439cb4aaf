// A tar delta made by the native engine (`snapflow-lazy pack` with a kept base: native/lazy/internal/pack/delta.go)
// against the agent's own pass (container/archive/archive.ts singlePassInto with delta.ts) on the same tree after every
// kind of change: the layer manifests are the same bytes, the trees' whole manifests (kept for the next delta) equal
// entry by entry, the archives list the same entries, the counts agree — streamed, and in upload mode (the parts PUT by
// the engine itself, or cut by the agent from its own pass). A kept base that is not the bytes its record vouches for
// is not used: the agent's pass makes the delta from the store's copy instead.
import { createHash } from "node:crypto";
import { execFileSync } from "node:child_process";
import { chmodSync, linkSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, unlinkSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { archiveWithManifestToFile, type SinglePassResult } from "../../container/archive/archive.ts";
import { uploadMultipart } from "../../container/transfer/presigned-multipart.ts";
import { ManifestSchema, LayerManifestSchema, type Manifest } from "../../container/contract/protocol.ts";

const zstd = { kind: "tar", compression: "zstd" } as const;
const work = mkdtempSync(join(tmpdir(), "snapflow-delta-engine-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));
const listing = (archive: string) => execFileSync("tar", ["-I", "zstd -d", "-tf", archive], { encoding: "utf8" }).split("\n").filter(Boolean);
const sha256 = (file: string) => createHash("sha256").update(readFileSync(file)).digest("hex");

const tree = join(work, "tree");
const baseFile = join(work, "base.json");
/** As the agent reads a kept copy (JSON.parse, no zod: zod would put each entry's keys in the schema's order). */
let base: Manifest;

/** A tree with each kind of entry a change can touch, its full snapshot (the base), then every kind of change. */
beforeAll(async () => {
  mkdirSync(join(tree, "gone-dir/deeper"), { recursive: true });
  mkdirSync(join(tree, "becomes-file"));
  mkdirSync(join(tree, "keep"));
  writeFileSync(join(tree, "keep/same.txt"), "unchanged\n");
  writeFileSync(join(tree, "keep/edited.txt"), "version 1\n");
  writeFileSync(join(tree, "keep/mode.txt"), "mode\n");
  writeFileSync(join(tree, "deleted.txt"), "bye\n");
  writeFileSync(join(tree, "gone-dir/a"), "a\n");
  writeFileSync(join(tree, "gone-dir/deeper/b"), "b\n");
  writeFileSync(join(tree, "becomes-file/inside"), "inside\n");
  writeFileSync(join(tree, "linked"), "one inode\n");
  writeFileSync(join(tree, "touched.txt"), "touched, not changed\n");
  symlinkSync("keep/same.txt", join(tree, "link"));
  const r = await archiveWithManifestToFile(tree, zstd, join(work, "base.tar.zst"), { manifestOut: baseFile, engine: "native" });
  expect(r.engine).toBe("native");
  base = JSON.parse(readFileSync(baseFile, "utf8")) as Manifest;
  ManifestSchema.parse(base);

  writeFileSync(join(tree, "keep/new.txt"), "new\n"); // new
  const edited = join(tree, "keep/edited.txt");
  writeFileSync(edited, "version 2\n"); // modified, same size
  utimesSync(edited, 2_000_000_000.5, 2_000_000_000.5); // ... with a new mtime
  chmodSync(join(tree, "keep/mode.txt"), 0o600); // mode only
  unlinkSync(join(tree, "deleted.txt")); // deleted file
  rmSync(join(tree, "gone-dir"), { recursive: true }); // deleted directory, and what was below it
  rmSync(join(tree, "becomes-file"), { recursive: true });
  writeFileSync(join(tree, "becomes-file"), "now a file\n"); // directory replaced by a file
  unlinkSync(join(tree, "link"));
  symlinkSync("keep/new.txt", join(tree, "link")); // symlink retargeted
  linkSync(join(tree, "linked"), join(tree, "keep/linked-too")); // hard link added
  const touched = join(tree, "touched.txt");
  const was = statSync(touched);
  writeFileSync(touched, "touched, not changed\n"); // same content, its ctime moved: a suspect, hashed, kept
  utimesSync(touched, was.atime, was.mtime);
});

/** The delta of `tree` against the base by one pass, its manifests kept in a directory of its own. */
async function deltaBy(engine: "native" | "node", name: string, kept: { sha256: string } = { sha256: sha256(baseFile) }) {
  const dir = join(work, name);
  mkdirSync(dir);
  const archive = join(dir, "delta.tar.zst");
  const manifestOut = join(dir, "layer.json");
  const keep = { dir: join(dir, "kept"), id: "delta-1" };
  const result: SinglePassResult = await archiveWithManifestToFile(tree, zstd, archive, {
    manifestOut, engine, layerOver: "base-1", keep,
    base: async () => base,
    ...(engine === "native" ? { baseKept: { file: baseFile, sha256: kept.sha256 } } : {}),
  });
  const wholeFile = join(keep.dir, "delta-1.json");
  return { result, archive: listing(archive), layerText: readFileSync(manifestOut, "utf8"), whole: ManifestSchema.parse(JSON.parse(readFileSync(wholeFile, "utf8"))), wholeSha256: sha256(wholeFile) };
}

/**
 * The same delta made in upload mode (container/transfer/presigned-multipart.ts uploadMultipart, as POST
 * /v1/upload-multipart runs it): its parts PUT to a local server standing in for the store's part URLs.
 */
async function deltaUploaded(engine: "native" | "node", name: string, kept: { sha256: string } = { sha256: sha256(baseFile) }) {
  const dir = join(work, name);
  mkdirSync(dir);
  const parts = new Map<number, Buffer>();
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const n = Number(new URL(req.url!, "http://x").searchParams.get("partNumber"));
    parts.set(n, Buffer.concat(chunks));
    res.setHeader("etag", `"part-${n}"`);
    res.end();
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  try {
    const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const manifestOut = join(dir, "layer.json");
    const keep = { dir: join(dir, "kept"), id: "delta-1" };
    const result = await uploadMultipart({ archive: { dir: tree, format: zstd, singlePass: { manifestOut, engine, layerOver: "base-1", keep, base: async () => base, baseKept: { file: baseFile, sha256: kept.sha256 } } } }, {
      partSize: 5 << 20, concurrency: 2, retries: 0, urls: [1, 2, 3].map((n) => `${origin}/delta?partNumber=${n}&uploadId=u`),
    });
    const archive = join(dir, "delta.tar.zst");
    writeFileSync(archive, Buffer.concat(result.parts.map((p) => parts.get(p.partNumber)!)));
    const wholeFile = join(keep.dir, "delta-1.json");
    return { result, archive: listing(archive), putSha256: sha256(archive), layerText: readFileSync(manifestOut, "utf8"), whole: ManifestSchema.parse(JSON.parse(readFileSync(wholeFile, "utf8"))) };
  } finally {
    server.close();
  }
}

describe("a tar delta by the native engine, against the agent's own pass", () => {
  it("writes the same layer manifest, keeps the same tree manifest and archives the same entries", async () => {
    const native = await deltaBy("native", "native");
    const node = await deltaBy("node", "node");
    expect(native.result.engine).toBe("native");
    expect(native.result.delta?.baseFrom).toBe("kept");
    expect(node.result.engine).toBe("node");

    // Same bytes: the layer's SHA-256 is what the record keeps and every reader checks.
    expect(native.layerText).toBe(node.layerText);
    const layer = LayerManifestSchema.parse(JSON.parse(native.layerText));
    expect(layer.base).toBe("base-1");
    // Deepest first, then in reverse order of names.
    expect(layer.removed).toEqual(["gone-dir/deeper/b", "gone-dir/deeper", "gone-dir/a", "becomes-file/inside", "gone-dir", "deleted.txt"]);
    expect(layer.entries.map((e) => e.path)).toEqual(["becomes-file", "keep", "keep/edited.txt", "keep/linked-too", "keep/mode.txt", "keep/new.txt", "link", "linked", "touched.txt"]);
    // The new name comes first in the walk: it is the group's first name now, the old one links to it.
    expect(layer.entries.find((e) => e.path === "linked")).toMatchObject({ link: "keep/linked-too" });
    expect(native.whole).toEqual(node.whole);
    expect(native.wholeSha256).toBe(node.wholeSha256);

    expect(native.archive).toEqual(node.archive);
    expect(native.archive).toEqual(["./becomes-file", "./keep/", "./keep/edited.txt", "./keep/linked-too", "./keep/mode.txt", "./keep/new.txt", "./link", "./linked"]);
    expect(native.archive).not.toContain("./touched.txt");
    expect(native.archive).not.toContain("./keep/same.txt");

    const { ms: _a, manifest: nativeManifest, delta: nativeDelta, engine: _e, ...nativeRest } = native.result;
    const { ms: _b, manifest: nodeManifest, delta: nodeDelta, engine: _f, ...nodeRest } = node.result;
    // (tarBytes differ: GNU tar pads its stream to 10 KiB records.)
    expect(nativeRest.archived.entries).toBe(nodeRest.archived.entries);
    expect({ ...nativeManifest, walkMs: 0 }).toEqual({ ...nodeManifest, walkMs: 0 });
    // (baseFrom: the engine read the kept copy; the agent's pass was handed the base here, from nowhere it names.)
    expect({ ...nativeDelta, planMs: 0, baseFrom: undefined }).toEqual({ ...nodeDelta, planMs: 0 });
    expect(nativeDelta).toMatchObject({ suspects: 1, deleted: layer.removed });
  });

  it("in upload mode (the default's path, tar-zst-delta): the engine PUTs the delta's parts itself, the same delta as the agent's pass cuts", async () => {
    const node = await deltaBy("node", "node-reference");
    const engine = await deltaUploaded("native", "upload-native");
    const agent = await deltaUploaded("node", "upload-node");
    expect({ by: engine.result.uploadedBy, engine: engine.result.engine, baseFrom: engine.result.delta?.baseFrom }).toEqual({ by: "engine", engine: "native", baseFrom: "kept" });
    expect({ by: agent.result.uploadedBy, engine: agent.result.engine }).toEqual({ by: "agent", engine: "node" });
    for (const up of [engine, agent]) {
      expect(up.layerText).toBe(node.layerText);
      expect(up.archive).toEqual(node.archive);
      expect(up.whole).toEqual(node.whole);
      expect(up.result.manifest).toMatchObject({ layerOf: "base-1", treeSha256: node.wholeSha256 });
      expect({ ...up.result.delta, planMs: 0, baseFrom: undefined }).toEqual({ ...node.result.delta, planMs: 0 });
      // What was PUT is the archive the answer names.
      expect(up.putSha256).toBe(up.result.sha256);
    }
    // A kept base that is not its record's bytes: nothing PUT by the engine, the agent's pass cuts the delta instead.
    const tampered = await deltaUploaded("native", "upload-tampered", { sha256: "0".repeat(64) });
    expect({ by: tampered.result.uploadedBy, engine: tampered.result.engine }).toEqual({ by: "agent", engine: "node" });
    expect(tampered.layerText).toBe(node.layerText);
  });

  it("does not use a kept base whose bytes are not the ones its record names: the agent's pass makes the delta", async () => {
    const tampered = await deltaBy("native", "tampered", { sha256: "0".repeat(64) });
    const node = await deltaBy("node", "node-again");
    expect(tampered.result.engine).toBe("node");
    expect(tampered.layerText).toBe(node.layerText);
  });
});
