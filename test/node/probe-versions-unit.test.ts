// The probe's version of a tool, read from what the tool prints when asked (container/system/probe.ts versionIn): on
// either stream, from the line that names the tool. The answers below are these tools' own, as printed by the
// versions in Debian 12 (this machine), Ubuntu 22.04 (the Sandbox SDK's base image) and later releases; the erofs-utils
// ones follow its sources (mkfs/main.c, fsck/main.c at v1.4, v1.5 and v1.8).
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { versionIn } from "../../container/system/probe.ts";
import { SNAPFLOW_RELEASE } from "../../container/contract/protocol.ts";

describe("versionIn", () => {
  it.each([
    // [tool, stdout, stderr, version]
    ["mkfs.erofs", "", "mkfs.erofs: invalid option -- 'V'\nmkfs.erofs 1.4\nusage: [options] FILE DIRECTORY\n -zX[,Y] X=compressor\n", "1.4"], // 1.4: on stderr, then refuses -V
    ["mkfs.erofs", "mkfs.erofs 1.5\n", "mkfs.erofs: invalid option -- 'V'\nusage: [options] FILE DIRECTORY\n", "1.5"], // 1.5–1.7: on stdout, then refuses -V
    ["mkfs.erofs", "mkfs.erofs (erofs-utils) 1.8.1\navailable compressors: lz4, lz4hc, lzma, deflate\n", "", "1.8.1"], // 1.8: -V
    ["fsck.erofs", "", "fsck.erofs 1.4\n", "1.4"],
    ["unsquashfs", "unsquashfs version 4.5 (2021/07/22)\ncopyright (C) 2021 Phillip Lougher <phillip@squashfs.org.uk>\n", "", "4.5"], // exits 1
    ["fuse-overlayfs", "fusermount3 version: 3.10.5\nfuse-overlayfs: version 1.7.1\nFUSE library version 3.10.5\nusing FUSE kernel interface version 7.31\n", "", "1.7.1"],
    ["zstd", "*** Zstandard CLI (64-bit) v1.4.8, by Yann Collet ***\n", "", "1.4.8"],
    ["lz4", "*** LZ4 command line interface 64-bits v1.9.3, by Yann Collet ***\n", "", "1.9.3"],
    ["aria2c", "aria2 version 1.36.0\nCopyright (C) 2006, 2019 Tatsuhiro Tsujikawa\n", "", "1.36.0"],
    ["squashfuse_ll", "", "squashfuse 0.1.103 (c) 2012 Dave Vasilevsky\n\nUsage: squashfuse_ll [options] ARCHIVE MOUNTPOINT\n", "0.1.103"],
    ["curl", "curl 7.81.0 (x86_64-pc-linux-gnu) libcurl/7.81.0 OpenSSL/3.0.2 zlib/1.2.11\nRelease-Date: 2022-01-05\n", "", "7.81.0"],
    ["snapflow-lazy", "snapflow-lazy 0.1.0 (go1.26.8)\n", "", "0.1.0"],
    ["snapflow-lazy", "", "usage:\n  snapflow-lazy chunk  --image FILE [--avg 512KiB]\n", "unknown"], // a helper older than `version`
  ])("%s: %j %j → %s", (name, stdout, stderr, version) => {
    expect(versionIn(name, stdout, stderr)).toBe(version);
  });
});

it("snapflow-lazy's release is snapflow's (package.json version)", () => {
  const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")).version;
  const go = readFileSync(new URL("../../native/lazy/cmd/snapflow-lazy/version.go", import.meta.url), "utf8").match(/const release = "([^"]+)"/)?.[1];
  expect(go).toBe(pkg);
});

it("the agent's release is snapflow's (package.json version): the doctor compares it with the Worker's", () => {
  const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")).version;
  expect(SNAPFLOW_RELEASE).toBe(pkg);
});
