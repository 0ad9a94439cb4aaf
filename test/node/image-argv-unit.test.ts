// The pure parts of images and mounts: mksquashfs / mkfs.erofs / extractor / mount argv for every format
// (container/images/image-argv.ts), with each compressor's level flag and the level ranges refused by field; then every
// builder line is run for real on a tiny tree to check the installed tools accept it. Also the mountinfo parser
// (escaped paths) and the unmount order (overlays before their lowers, inner mounts before outer ones).
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { AgentError } from "../../container/http/agent-error.ts";
import { checkOverlayPath, extractImageArgv, makeImageArgv, mkfsErofsArgv, mksquashfsArgv, mountKernelArgv, overlayKernelArgv, squashfsLevelArgs, unmountArgv } from "../../container/images/image-argv.ts";
import { parseMountinfo, unmountOrder, type MountRecord } from "../../container/mounts/mounts.ts";
import type { ErofsFormat, ImageFormat, SquashfsFormat } from "../../container/contract/protocol.ts";

const sq = (compression: SquashfsFormat["compression"], extra: Partial<SquashfsFormat> = {}): SquashfsFormat => ({ kind: "squashfs", compression, ...extra });
const er = (compression: ErofsFormat["compression"], level?: number): ErofsFormat => ({ kind: "erofs", compression, ...(level === undefined ? {} : { level }) });
const onPath = (tool: string) => spawnSync("sh", ["-c", `command -v ${tool}`]).status === 0;

function fieldOf(run: () => unknown): string | undefined {
  try {
    run();
  } catch (e) {
    if (e instanceof AgentError) return `${e.status} ${e.field}`;
    throw e;
  }
  return undefined;
}

describe("mksquashfsArgv", () => {
  it("runs without SOURCE_DATE_EPOCH (which would clamp mtimes), replaces the output, fails on unreadable files", () => {
    expect(mksquashfsArgv("/src", "/out.sqfs", sq("zstd"), 4)).toEqual([
      "env", "-u", "SOURCE_DATE_EPOCH",
      "mksquashfs", "/src", "/out.sqfs",
      "-noappend", "-exit-on-error", "-no-xattrs", "-quiet", "-no-progress",
      "-comp", "zstd", "-processors", "4",
    ]);
    expect(mksquashfsArgv("/src", "/o", sq("gzip", { blockSize: 1 << 20 }), 0)).toEqual(expect.arrayContaining(["-b", "1048576"]));
    expect(mksquashfsArgv("/src", "/o", sq("gzip"), 0).slice(-2)).toEqual(["-processors", "1"]);
  });

  it.each<[SquashfsFormat, string[]]>([
    [sq("zstd", { level: 3 }), ["-Xcompression-level", "3"]],
    [sq("zstd", { level: 22 }), ["-Xcompression-level", "22"]],
    [sq("gzip", { level: 9 }), ["-Xcompression-level", "9"]],
    [sq("lzo", { level: 5 }), ["-Xalgorithm", "lzo1x_999", "-Xcompression-level", "5"]],
    [sq("lz4", { level: 1 }), []],
    [sq("lz4", { level: 9 }), ["-Xhc"]],
    [sq("xz"), []],
  ])("%j → %j", (format, args) => {
    expect(squashfsLevelArgs(format)).toEqual(args);
  });

  it("refuses levels a compressor does not have, naming format.level", () => {
    expect(fieldOf(() => squashfsLevelArgs(sq("gzip", { level: 10 })))).toBe("400 format.level");
    expect(fieldOf(() => squashfsLevelArgs(sq("lzo", { level: 12 })))).toBe("400 format.level");
    expect(fieldOf(() => squashfsLevelArgs(sq("xz", { level: 6 })))).toBe("400 format.level");
  });
});

describe("mkfsErofsArgv", () => {
  it("keeps per-file mtimes (no -T, --preserve-mtime, no SOURCE_DATE_EPOCH), no xattrs; chunked when uncompressed", () => {
    const head = ["env", "-u", "SOURCE_DATE_EPOCH", "mkfs.erofs", "--quiet", "--preserve-mtime", "-x-1"];
    expect(mkfsErofsArgv("/src", "/o", er("none"))).toEqual([...head, "--chunksize=4096", "/o", "/src"]);
    expect(mkfsErofsArgv("/src", "/o", er("lz4"))).toEqual([...head, "-zlz4", "/o", "/src"]);
    expect(mkfsErofsArgv("/src", "/o", er("lz4hc"))).toEqual([...head, "-zlz4hc", "/o", "/src"]);
    expect(mkfsErofsArgv("/src", "/o", er("lz4hc", 12))).toEqual([...head, "-zlz4hc,12", "/o", "/src"]);
    expect(mkfsErofsArgv("/src", "/o", er("lz4hc")).some((a) => a.startsWith("-T") || a === "--all-time" || a === "--ignore-mtime")).toBe(false);
  });

  it("only lz4hc has levels", () => {
    expect(fieldOf(() => mkfsErofsArgv("/s", "/o", er("lz4", 3)))).toBe("400 format.level");
    expect(fieldOf(() => mkfsErofsArgv("/s", "/o", er("none", 1)))).toBe("400 format.level");
  });
});

describe("extract, mount and unmount argv", () => {
  it("extractors write into an existing directory and keep permissions; fsck.erofs does not hand files to the image's owners", () => {
    expect(extractImageArgv("/i.sqfs", "/d", "squashfs")).toEqual(["unsquashfs", "-d", "/d", "-f", "-n", "-q", "-no-xattrs", "/i.sqfs"]);
    expect(extractImageArgv("/i.erofs", "/d", "erofs")).toEqual(["fsck.erofs", "--extract=/d", "--overwrite", "--preserve-perms", "/i.erofs"]);
  });

  it("kernel mounts are read-only loop mounts; overlays refuse paths their option syntax cannot carry", () => {
    expect(mountKernelArgv("/i", "/m", "erofs")).toEqual(["mount", "-t", "erofs", "-o", "loop,ro,nosuid,nodev", "/i", "/m"]);
    expect(overlayKernelArgv("/l", "/u", "/w", "/m")).toEqual(["mount", "-t", "overlay", "overlay", "-o", "nosuid,nodev,redirect_dir=off,lowerdir=/l,upperdir=/u,workdir=/w", "/m"]);
    expect(unmountArgv("/m", true)).toEqual(["fusermount3", "-u", "/m"]);
    expect(unmountArgv("/m", false)).toEqual(["umount", "/m"]);
    for (const bad of ["/a,b", "/a:b", "/a\\b"]) expect(fieldOf(() => checkOverlayPath(bad, "lower"))).toBe("400 lower");
    expect(checkOverlayPath("/a b/c", "lower")).toBe("/a b/c");
  });
});

describe("the installed builders accept every line", () => {
  const formats: ImageFormat[] = [
    sq("zstd", { level: 1 }), sq("lz4"), sq("lz4", { level: 9 }), sq("lzo", { level: 1 }), sq("gzip", { level: 1, blockSize: 4096 }), sq("xz"),
    er("none"), er("lz4"), er("lz4hc"), er("lz4hc", 12),
  ];
  for (const format of formats) {
    const tool = format.kind === "squashfs" ? "mksquashfs" : "mkfs.erofs";
    it.skipIf(!onPath(tool))(`${JSON.stringify(format)}${onPath(tool) ? "" : ` — SKIPPED: ${tool} is not installed`}`, () => {
      const dir = mkdtempSync(join(tmpdir(), "snapflow-image-argv-"));
      try {
        mkdirSync(join(dir, "src/sub"), { recursive: true });
        writeFileSync(join(dir, "src/sub/a.txt"), "hello ".repeat(1000));
        const argv = makeImageArgv(join(dir, "src"), join(dir, "out.img"), format, 2);
        const r = spawnSync(argv[0]!, argv.slice(1), { encoding: "utf8" });
        expect(r.status, r.stderr).toBe(0);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  }
});

describe("parseMountinfo", () => {
  it("reads mount point, type, source and per-mount options, unescaping \\040 and friends", () => {
    const text = [
      "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw",
      "42 27 0:39 / /w/with\\040space rw,nosuid shared:5 - fuse.squashfuse_ll squashfuse_ll rw,user_id=0",
      "43 27 0:40 / /w/tab\\011and\\134slash rw - overlay overlay rw,lowerdir=/l",
      "",
    ].join("\n");
    expect(parseMountinfo(text)).toEqual([
      { mountPoint: "/", fstype: "ext4", source: "/dev/vda", options: ["rw", "relatime"], superOptions: ["rw"] },
      { mountPoint: "/w/with space", fstype: "fuse.squashfuse_ll", source: "squashfuse_ll", options: ["rw", "nosuid"], superOptions: ["rw", "user_id=0"] },
      { mountPoint: "/w/tab\tand\\slash", fstype: "overlay", source: "overlay", options: ["rw"], superOptions: ["rw", "lowerdir=/l"] },
    ]);
  });
});

describe("unmountOrder", () => {
  const rec = (hostPath: string, hostSources: string[]): MountRecord => ({
    entry: { path: hostPath, kind: "image", source: "", how: "mount-kernel", tool: "mount", fstype: "", since: "" },
    hostPath, hostSources, fuse: false,
  });

  it("overlays before their lowers, a mount inside another before it, image files' mounts before the image's", () => {
    const base = rec("/r/workspace/base", ["/r/snapflow/i.sqfs"]);
    const app = rec("/r/workspace/app", ["/r/workspace/base", "/r/snapflow/overlays/x/upper", "/r/snapflow/overlays/x/work"]);
    const inner = rec("/r/workspace/app/inner", ["/r/snapflow/j.sqfs"]);
    const fromImageInBase = rec("/r/workspace/nested", ["/r/workspace/base/images/k.sqfs"]);
    const order = unmountOrder([base, app, inner, fromImageInBase]).map((r) => r.hostPath);
    expect(order.indexOf("/r/workspace/app")).toBeLessThan(order.indexOf("/r/workspace/base"));
    expect(order.indexOf("/r/workspace/app/inner")).toBeLessThan(order.indexOf("/r/workspace/app"));
    expect(order.indexOf("/r/workspace/nested")).toBeLessThan(order.indexOf("/r/workspace/base"));
    expect(order).toHaveLength(4);
  });

  it("independent mounts go newest first", () => {
    expect(unmountOrder([rec("/a", []), rec("/b", []), rec("/c", [])]).map((r) => r.hostPath)).toEqual(["/c", "/b", "/a"]);
  });
});
