// The single-pass archiver (container/archive/archive.ts archiveWithManifest) against real tar and compressors: the
// manifest it makes from the tar stream equals a walk-and-hash of the source (takeManifest) and of the tree the
// archive extracts to, for the tricky dataset and every compression; it carries the walk's lstat key; and a
// tree changed while it is archived ends either in a clear error naming a file or in an archive and manifest that
// agree with each other (extracted and compared), never in a manifest that disagrees with its archive.
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { once } from "node:events";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { archiveWithManifest, archiveWithManifestToFile } from "../../container/archive/archive.ts";
import { generateDataset } from "../../container/system/dataset.ts";
import { compareManifests, takeManifest } from "../../container/manifest/manifest.ts";
import { ManifestSchema, type Manifest, type TarFormat } from "../../container/contract/protocol.ts";
import { decompressProgram } from "../../container/archive/tar-argv.ts";

const onPath = (tool: string) => spawnSync("sh", ["-c", `command -v ${tool}`]).status === 0;
const readManifest = (file: string): Manifest => ManifestSchema.parse(JSON.parse(readFileSync(file, "utf8")));

function extract(archive: string, format: TarFormat, dir: string) {
  mkdirSync(dir, { recursive: true });
  const program = decompressProgram(format);
  execFileSync("tar", ["--numeric-owner", "-p", "-C", dir, ...(program ? ["-I", program] : []), "-xf", archive]);
}

let base: string;
let tricky: string;
beforeAll(async () => {
  base = mkdtempSync(join(tmpdir(), "snapflow-single-pass-"));
  tricky = join(base, "tricky");
  await generateDataset(tricky, { kind: "tricky", seed: 7, replace: true });
});
afterAll(() => rmSync(base, { recursive: true, force: true }));

describe("archiveWithManifest", () => {
  it.each<TarFormat["compression"]>(["zstd", "none", "gzip", "lz4", "pigz"])("%s: the manifest from the tar stream equals a walk-and-hash of the source and of the extracted archive", async (compression) => {
    if (compression !== "none" && !onPath(compression)) return;
    const format: TarFormat = { kind: "tar", compression };
    const archive = join(base, `tricky-${compression}.tar`);
    const manifestOut = join(base, `tricky-${compression}.manifest.json`);
    const r = await archiveWithManifestToFile(tricky, format, archive, { manifestOut });
    const made = readManifest(manifestOut);
    const source = await takeManifest(tricky);
    expect(compareManifests(source, made)).toMatchObject({ equal: true });
    expect(made.totals).toEqual(source.totals);
    expect(r.manifest).toMatchObject({ totals: source.totals, entries: source.entries.length });
    expect(r.archived.entries).toBe(source.entries.length);
    expect(r.bytes).toBe(readFileSync(archive).length);
    const out = join(base, `out-${compression}`);
    extract(archive, format, out);
    expect(compareManifests(made, await takeManifest(out))).toMatchObject({ equal: true });
  });

  it("records the walk's lstat key (inode, device, ns mtime and ctime) on every entry, hashes only files, links later hard-link names", async () => {
    const manifestOut = join(base, "key.manifest.json");
    await archiveWithManifestToFile(tricky, { kind: "tar", compression: "zstd" }, join(base, "key.tar.zst"), { manifestOut });
    const m = readManifest(manifestOut);
    for (const e of m.entries) {
      expect(e.stat).toEqual({ ino: expect.stringMatching(/^\d+$/), dev: expect.stringMatching(/^\d+$/), mtimeNs: expect.stringMatching(/^-?\d+$/), ctimeNs: expect.stringMatching(/^\d+$/) });
      expect(Math.floor(Number(BigInt(e.stat!.mtimeNs) / 1_000_000n) / 1000)).toBe(e.mtime);
      expect(e.sha256 !== undefined).toBe(e.type === "file" && !e.link);
    }
    expect(m.entries.some((e) => e.link)).toBe(true);
  });

  it("streams to any writable (the HTTP response) and writes the manifest beside it", async () => {
    const out = new PassThrough();
    const chunks: Buffer[] = [];
    out.on("data", (c: Buffer) => chunks.push(c));
    const manifestOut = join(base, "stream.manifest.json");
    const r = await archiveWithManifest(tricky, { kind: "tar", compression: "zstd" }, out, { manifestOut });
    expect(Buffer.concat(chunks).length).toBe(r.bytes);
    expect(readManifest(manifestOut).totals).toEqual(r.manifest.totals);
  });

  it("an empty tree makes an empty archive and an empty manifest", async () => {
    const empty = join(base, "empty");
    mkdirSync(empty);
    const manifestOut = join(base, "empty.manifest.json");
    await archiveWithManifestToFile(empty, { kind: "tar", compression: "zstd" }, join(base, "empty.tar.zst"), { manifestOut });
    expect(readManifest(manifestOut)).toEqual({ version: 1, entries: [], totals: { files: 0, dirs: 0, symlinks: 0, bytes: 0 } });
  });

  it("refuses an output inside the tree", async () => {
    await expect(archiveWithManifestToFile(tricky, { kind: "tar", compression: "zstd" }, join(tricky, "x.tar.zst"), { manifestOut: join(base, "x.json") })).rejects.toMatchObject({ code: "bad_request", field: "output" });
  });
});

describe("a tree changed while it is archived", () => {
  it("ends consistent: old or new content in archive and manifest alike, or an error naming the file", { timeout: 180_000 }, async () => {
    const tree = join(base, "churn");
    mkdirSync(join(tree, "d"), { recursive: true });
    // Big files, so tar is still reading when the writer strikes; many small ones, so the walk is ahead of tar.
    for (let i = 0; i < 6; i++) writeFileSync(join(tree, `big-${i}.bin`), randomBytes(8 << 20));
    for (let i = 0; i < 300; i++) writeFileSync(join(tree, "d", `f${i}.txt`), `small ${i}\n`);

    const outcomes = { consistent: 0, refused: 0, reasons: [] as string[] };
    for (let round = 0; round < 6; round++) {
      // The writer, a process of its own. Even rounds rewrite big files in place (torn unless tar notices); odd
      // rounds only replace files by rename (atomic) and delete and re-create small ones.
      const inPlace = round % 2 === 0 ? `head -c 8M /dev/urandom > big-$((i % 6)).bin;` : `head -c 8M /dev/urandom > .big; mv .big big-$((i % 6)).bin;`;
      const script = `cd '${tree}'; i=0; while :; do ${inPlace} echo "replaced $i" > .tmp; mv .tmp d/f$((i % 300)).txt; rm -f d/f$(((i + 7) % 300)).txt; echo "again $i" > d/f$(((i + 7) % 300)).txt; i=$((i + 1)); sleep 0.01; done`;
      const writer = spawn("bash", ["-c", script], { stdio: "ignore" });
      const archive = join(base, `churn-${round}.tar.zst`);
      const manifestOut = join(base, `churn-${round}.manifest.json`);
      const result = await archiveWithManifestToFile(tree, { kind: "tar", compression: "zstd", level: 1 }, archive, { manifestOut }).then(
        () => "ok" as const,
        (e: Error & { code?: string }) => e,
      );
      writer.kill("SIGKILL");
      await once(writer, "close");
      if (result === "ok") {
        outcomes.consistent++;
        const out = join(base, `churn-out-${round}`);
        extract(archive, { kind: "tar", compression: "zstd" }, out);
        // Whatever the writer did, the manifest describes exactly what the archive holds.
        // The differences themselves, so that a failure says which entry and field disagreed.
        expect(compareManifests(readManifest(manifestOut), await takeManifest(out)).differences).toEqual([]);
        rmSync(out, { recursive: true, force: true });
      } else {
        outcomes.refused++;
        outcomes.reasons.push(result.message.slice(0, 160));
        expect(/the tree changed while it was archived.*(big-\d\.bin|\.big|d\/f\d+\.txt) \(/.test(result.message), result.message).toBe(true);
        expect(result.code).toBe("tool_failed");
        // Nothing half-made is left to be mistaken for a snapshot.
        expect(() => readFileSync(archive)).toThrow();
        expect(() => readFileSync(manifestOut)).toThrow();
      }
    }
    expect(outcomes.consistent + outcomes.refused).toBe(6);
    console.log("churn outcomes", outcomes);
  });
});
