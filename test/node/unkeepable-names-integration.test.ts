// Names a backup cannot keep are refused, never left out of a backup that calls itself complete (issue 22):
//   - a name that is not UTF-8: Node reads it as U+FFFD, lstat finds no such file, and the walk (tree-walk.ts,
//     manifest.ts) used to skip it; now every manifest path fails with bad_request naming the directory, and a
//     streamed archive records why in its result file before the stream is cut (archive.ts), where the Worker reads it;
//   - a 255-byte name in an erofs backup: mkfs.erofs 1.5 fails on it with words that name nothing; now refused up
//     front naming the entry (erofs-names.ts);
//   - sockets: tar leaves them out, and now so do the images' two-pass builds, so every format treats them alike.
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { archiveWithManifest } from "../../container/archive/archive.ts";
import { makeImageWithManifest } from "../../container/images/image-with-manifest.ts";
import { takeManifest } from "../../container/manifest/manifest.ts";

const onPath = (tool: string) => spawnSync("sh", ["-c", `command -v ${tool}`]).status === 0;
let base: string;
let bad: string;

beforeAll(() => {
  base = mkdtempSync(join(tmpdir(), "snapflow-names-"));
  bad = join(base, "bad");
  mkdirSync(join(bad, "sub"), { recursive: true });
  writeFileSync(join(bad, "ok.txt"), "ok");
  // The name itself: "latin1-caf" followed by the byte 0xE9 (é in Latin-1), which is not UTF-8.
  writeFileSync(Buffer.concat([Buffer.from(join(bad, "sub/latin1-caf")), Buffer.from([0xe9])]), "not UTF-8");
});
afterAll(() => rmSync(base, { recursive: true, force: true }));

describe("a name that is not UTF-8", () => {
  it("fails the single-pass archive with bad_request naming its directory, and the result file says so", async () => {
    const out = new PassThrough();
    out.resume();
    const resultOut = join(base, "staging/result.json");
    await expect(archiveWithManifest(bad, { kind: "tar", compression: "zstd" }, out, { manifestOut: join(base, "m.json"), resultOut })).rejects.toMatchObject({ code: "bad_request", field: "path", message: expect.stringContaining(`${join(bad, "sub")} holds a name that is not UTF-8`) });
    expect(JSON.parse(readFileSync(resultOut, "utf8"))).toMatchObject({ error: { code: "bad_request", field: "path" }, status: 400 });
  });

  it("fails a walk-and-hash manifest (the images' two passes) the same way", async () => {
    await expect(takeManifest(bad)).rejects.toMatchObject({ code: "bad_request", field: "path" });
  });
});

describe("images' names and sockets", () => {
  it("an erofs backup of a 255-byte name is refused naming the entry; 254 bytes go through", async () => {
    if (!onPath("mkfs.erofs")) return;
    const tree = join(base, "long");
    mkdirSync(tree, { recursive: true });
    writeFileSync(join(tree, "n".repeat(255)), "x");
    const options = { manifestOut: join(base, "long.json") };
    await expect(makeImageWithManifest(tree, { kind: "erofs", compression: "lz4" }, join(base, "long.erofs"), options)).rejects.toMatchObject({ code: "bad_request", field: "path", message: expect.stringContaining("255-byte name") });
    rmSync(join(tree, "n".repeat(255)));
    writeFileSync(join(tree, "n".repeat(254)), "x");
    await expect(makeImageWithManifest(tree, { kind: "erofs", compression: "lz4" }, join(base, "long.erofs"), options)).resolves.toMatchObject({ onePass: false });
  });

  it("a socket is left out of an image's manifest and of the image, as tar leaves it out", async () => {
    if (!onPath("mkfs.erofs") || !onPath("python3")) return;
    const tree = join(base, "socket");
    mkdirSync(tree, { recursive: true });
    writeFileSync(join(tree, "file"), "x");
    spawnSync("python3", ["-c", "import socket,os; os.chdir(os.sys.argv[1]); socket.socket(socket.AF_UNIX).bind('sock')", tree]);
    const manifestOut = join(base, "socket.json");
    await makeImageWithManifest(tree, { kind: "erofs", compression: "lz4" }, join(base, "socket.erofs"), { manifestOut });
    const manifest = JSON.parse(readFileSync(manifestOut, "utf8"));
    expect(manifest.entries.map((e: { path: string }) => e.path)).toEqual(["file"]);
    const listed = spawnSync("fsck.erofs", ["--extract=" + join(base, "socket-out"), join(base, "socket.erofs")]);
    expect(listed.status).toBe(0);
    expect(spawnSync("ls", ["-A", join(base, "socket-out")], { encoding: "utf8" }).stdout.trim().split("\n")).toEqual(["file"]);
  });
});
