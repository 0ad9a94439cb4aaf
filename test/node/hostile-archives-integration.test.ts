// The hostile corpus (test/fixtures/hostile-corpus.ts) against the real agent (in-process, host mode) and the real
// tools: GNU tar under every compression, unsquashfs, fsck.erofs, kernel and FUSE mounts. Each test is named after
// the attack it tries. Every attack aims at two sentinels: one in the sandbox beside the target
// (/workspace/outside, the target's parent's other child) and one on the host above the sandbox (base/outside),
// over every depth. After each attack both sentinels and the target's parent are as they were, and no `*evil*`
// file exists anywhere but inside the target.
import { execFileSync, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, lstatSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { agentTokenFor } from "../../container/contract/agent-token.ts";
import { parseMountinfo } from "../../container/mounts/mounts.ts";
import { hasCapSysAdmin } from "../../container/system/probe.ts";
import { createAgentServer } from "../../container/http/server.ts";
import { compress, deltaThroughBaseSymlink, hostileDeletions, imageCases, imageToolMissing, TAR_ATTACKS, tarCases, tarOf, type Compression, type CorpusOptions, type ImageKind } from "../fixtures/hostile-corpus.ts";

const SECRET = randomBytes(32).toString("hex");
const SENTINEL = "sentinel: must not change\n"; // SENTINEL_BYTES long: lying-dirent-types aims at its size
let base: string;
let server: Server;
let url: string;
let n = 0;
let sb: string;
let corpus: CorpusOptions;

const sandboxDir = (p = "") => join(base, "sandboxes", sb, p);
const hostOutside = () => join(base, "outside");

async function agent(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const raw = body instanceof Uint8Array;
  const r = await fetch(`${url}${path}`, {
    method,
    headers: { authorization: `Bearer ${await agentTokenFor(SECRET, sb)}`, "x-snapflow-sandbox": sb, ...(body !== undefined && !raw ? { "content-type": "application/json" } : {}) },
    body: body === undefined ? undefined : raw ? (body as BodyInit) : JSON.stringify(body),
  });
  return { status: r.status, body: await r.json() };
}

const extract = (archive: Uint8Array, compression: Compression = "none", path = "/workspace/t") => agent("PUT", `/v1/extract?path=${path}&kind=tar&compression=${compression}`, archive);

/** Every file or directory under `dir` whose name holds "evil", as paths relative to `base`. */
function evilUnder(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const p = join(d, name);
      if (name.includes("evil")) out.push(relative(base, p));
      if (lstatSync(p).isDirectory()) walk(p);
    }
  };
  walk(dir);
  return out;
}

/** Both sentinels and the target's parent as they were; nothing `*evil*` outside the target. */
function untouched(parentHolds = ["outside", "t"]) {
  for (const dir of [hostOutside(), sandboxDir("workspace/outside")]) {
    expect(readdirSync(dir), dir).toEqual(["sentinel"]);
    expect(readFileSync(join(dir, "sentinel"), "utf8")).toBe(SENTINEL);
  }
  expect(readdirSync(sandboxDir("workspace")).sort()).toEqual(parentHolds);
  // The directories between the sandbox and the host outside: nothing landed there either.
  expect(readdirSync(base).sort()).toEqual(["outside", "sandboxes"]);
  expect(readdirSync(join(base, "sandboxes"))).toEqual([sb]);
  const target = relative(base, sandboxDir("workspace/t"));
  expect(evilUnder(base).filter((p) => p !== target && !p.startsWith(`${target}/`))).toEqual([]);
}

beforeAll(async () => {
  base = mkdtempSync(join(tmpdir(), "snapflow-hostile-"));
  corpus = { outsideRel: "../outside", outsideAbs: ["/workspace/outside", join(base, "outside")] };
  server = createAgentServer({ auth: { secret: SECRET }, sandboxesDir: join(base, "sandboxes"), storeOrigins: ["http://store.invalid"] });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  // Anything a failed test left mounted goes before the directories.
  for (const m of parseMountinfo(readFileSync("/proc/self/mountinfo", "utf8")).filter((m) => m.mountPoint.startsWith(base)).reverse()) spawnSync("umount", ["-l", m.mountPoint]);
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
  rmSync(base, { recursive: true, force: true });
});
beforeEach(async () => {
  // One sandbox per test; the previous one goes, so the host-level checks see only this one.
  if (sb) await agent("DELETE", "/v1/sandbox");
  sb = `hostile-${n++}`;
  for (const dir of [hostOutside(), sandboxDir("workspace/outside")]) {
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, "sentinel"), SENTINEL);
  }
});

/** What each single-archive attack must come to: refused by tar (nothing of the archive merged), or kept inside. */
const tarOutcome: Record<string, (r: { status: number; body: any }) => void> = {
  // GNU tar strips the leading '/': the entries land inside the target, under the names the archive gave them.
  "absolute-path": (r) => {
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(readFileSync(sandboxDir("workspace/t/ok.txt"), "utf8")).toBe("ok");
    expect(readFileSync(sandboxDir(`workspace/t/workspace/outside/abs-evil-0`), "utf8")).toBe("absolute");
    expect(readFileSync(join(sandboxDir("workspace/t"), base, "outside/abs-evil-1"), "utf8")).toBe("absolute");
  },
  // tar refuses '..' members and exits 2: the layer is dropped whole, the target stays empty.
  "dot-dot": (r) => {
    expect(r.status, JSON.stringify(r.body)).toBe(500);
    expect(r.body.error.message).toMatch(/Member name contains '\.\.'/);
    expect(readdirSync(sandboxDir("workspace/t"))).toEqual([]);
  },
  // Link targets lose their '/' and '../' prefixes and name nothing inside the empty staging directory.
  "hard-link-out": (r) => {
    expect(r.status, JSON.stringify(r.body)).toBe(500);
    expect(r.body.error.message).toMatch(/Cannot hard link/);
    expect(readdirSync(sandboxDir("workspace/t"))).toEqual([]);
  },
  // tar holds a symlink leading out back until the end (a placeholder file stands in), so s0/… cannot be created.
  "symlink-then-file": (r) => {
    expect(r.status, JSON.stringify(r.body)).toBe(500);
    expect(r.body.error.message).toMatch(/Not a directory/);
    expect(readdirSync(sandboxDir("workspace/t"))).toEqual([]);
  },
  "setuid-and-device": (r) => {
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(statSync(sandboxDir("workspace/t/suid")).mode & 0o7777).toBe(0o755);
    expect(statSync(sandboxDir("workspace/t/plain")).mode & 0o7777).toBe(0o640);
    // Directories keep setgid (group inheritance grants nothing).
    expect(statSync(sandboxDir("workspace/t/sgid-dir")).mode & 0o7777).toBe(0o2755);
    expect(existsSync(sandboxDir("workspace/t/null"))).toBe(false);
    expect(existsSync(sandboxDir("workspace/t/disk"))).toBe(false);
    // Owners are not the archive's: whoever runs the agent owns what it restored.
    for (const f of ["suid", "plain", "foreign"]) expect(statSync(sandboxDir(`workspace/t/${f}`)).uid, f).toBe(process.getuid!());
  },
};

describe.each<Compression>(["none", "zstd", "gzip", "lz4"])("tar (%s): one archive", (compression) => {
  it.each(TAR_ATTACKS)("%s", async (name) => {
    // The host's outside path is known only once base exists: the corpus is built here, not at collection.
    const c = tarCases(corpus).find((x) => x.name === name)!;
    const r = await extract(compress(tarOf(c.entries), compression), compression);
    untouched();
    tarOutcome[name]!(r);
  });
});

describe("tar: layers", () => {
  it("delta-through-base-symlink: a base's links out, then a layer holding only link*/delta-evil, write nothing outside", async () => {
    const { base: baseEntries, layer } = deltaThroughBaseSymlink(corpus);
    expect((await extract(tarOf(baseEntries))).status).toBe(200);
    expect(lstatSync(sandboxDir("workspace/t/link0")).isSymbolicLink()).toBe(true);
    const r = await extract(tarOf(layer));
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    untouched();
    // The layer's files are in the tree, in real directories that replaced the symlinks; the base's file stays.
    expect(lstatSync(sandboxDir("workspace/t/link0")).isDirectory()).toBe(true);
    expect(readFileSync(sandboxDir("workspace/t/link0/delta-evil-0"), "utf8")).toBe("written through the base's symlink\n");
    expect(readFileSync(sandboxDir("workspace/t/keep.txt"), "utf8")).toBe("base\n");
    // Nothing of the staging is left behind.
    expect(readdirSync(sandboxDir("workspace/t")).filter((x) => x.startsWith(".snapflow"))).toEqual([]);
  });

  it("delta-through-sandbox-symlink: a symlink the sandbox's own code planted in the target is not followed either", async () => {
    mkdirSync(sandboxDir("workspace/t"), { recursive: true });
    symlinkSync("../outside", sandboxDir("workspace/t/planted"));
    symlinkSync(hostOutside(), sandboxDir("workspace/t/planted-host"));
    expect((await extract(tarOf([{ name: "planted/sentinel", type: "f", data: "overwrite" }, { name: "planted-host/sentinel", type: "f", data: "overwrite" }]))).status).toBe(200);
    untouched();
  });
});

describe("deletion lists", () => {
  it("hostile-deletion-list: entries through a symlink are skipped, '..' and absolute entries refused naming the entry", async () => {
    const d = hostileDeletions(corpus);
    expect((await extract(tarOf(d.base))).status).toBe(200);
    const r = await agent("POST", "/v1/remove", { path: "/workspace/t", entries: d.throughSymlinks });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body).toEqual({ removed: 1, skipped: d.throughSymlinks.filter((e) => e !== "real/gone.txt") });
    expect(existsSync(sandboxDir("workspace/t/real/gone.txt"))).toBe(false);
    for (const entries of d.outOfTree) {
      const bad = await agent("POST", "/v1/remove", { path: "/workspace/t", entries: ["real", ...entries] });
      expect(bad.status, entries[0]).toBe(400);
      expect(bad.body.error).toMatchObject({ code: "path_outside_root", field: "entries.1" });
    }
    // Refused lists remove nothing, not even their good entries.
    expect(existsSync(sandboxDir("workspace/t/real"))).toBe(true);
    // The last component may be a symlink: it is removed itself, not what it points to.
    const last = await agent("POST", "/v1/remove", { path: "/workspace/t", entries: ["dl0"] });
    expect(last.body).toEqual({ removed: 1, skipped: [] });
    untouched();
  });
});

const kinds: ImageKind[] = ["squashfs", "erofs"];

describe.each(kinds)("%s images", (kind) => {
  const missing = imageToolMissing(kind);
  const image = (name: string) => imageCases(kind, corpus).find((c) => c.name === name)!.bytes;
  const format = kind === "squashfs" ? { kind, compression: "zstd" } : { kind, compression: "none" };
  const place = (bytes: Uint8Array) => {
    mkdirSync(sandboxDir("snapflow/images"), { recursive: true });
    writeFileSync(sandboxDir(`snapflow/images/i.${kind}`), bytes);
    return `/snapflow/images/i.${kind}`;
  };
  const materialize = (archive: string, how = "extract", path = "/workspace/t") => agent("POST", "/v1/materialize", { archive, path, format, how });

  it.skipIf(missing)(`dot-dot-names: an image whose names hold '/' (patched in) is refused before anything is written${missing ? ` — SKIPPED: ${missing}` : ""}`, async () => {
    const r = await materialize(place(image("dot-dot-names")));
    // unsquashfs refuses the names itself; fsck.erofs 1.5 would write them out, so the agent reads the image first.
    if (kind === "squashfs") expect(r.body.error, JSON.stringify(r.body)).toMatchObject({ code: "tool_failed", message: expect.stringMatching(/invalid characters in name/) });
    else expect(r.body.error, JSON.stringify(r.body)).toMatchObject({ code: "path_outside_root", field: "archive", message: expect.stringMatching(/name-evil/) });
    expect(readdirSync(sandboxDir("workspace/t"))).toEqual([]);
    untouched();
  });

  it.skipIf(missing)(`symlink-then-file: a symlink and a directory under one name (patched in) are refused${missing ? ` — SKIPPED: ${missing}` : ""}`, async () => {
    const r = await materialize(place(image("symlink-then-file")));
    if (kind === "squashfs") expect(r.body.error, JSON.stringify(r.body)).toMatchObject({ code: "tool_failed", message: expect.stringMatching(/duplicate names/) });
    else expect(r.body.error, JSON.stringify(r.body)).toMatchObject({ code: "path_outside_root", message: expect.stringMatching(/DUPNAME_A.*twice/) });
    expect(readdirSync(sandboxDir("workspace/t"))).toEqual([]);
    untouched();
  });

  it.skipIf(missing)(`layer-through-target-symlink: an image extracted over a target whose x leads out writes nothing outside${missing ? ` — SKIPPED: ${missing}` : ""}`, async () => {
    mkdirSync(sandboxDir("workspace/t"), { recursive: true });
    symlinkSync("../outside", sandboxDir("workspace/t/x"));
    const r = await materialize(place(image("layer-through-target-symlink")));
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    untouched();
    expect(lstatSync(sandboxDir("workspace/t/x")).isDirectory()).toBe(true);
    expect(readFileSync(sandboxDir("workspace/t/x/layer-evil"), "utf8")).toBe("from the image");
  });

  // The attack that wrote outside the target until the listing's types were checked against the inodes and the passes
  // after extraction went through descriptors (issue 21): the outside sentinel would gain a hard link into the tree
  // and, with keepOwnership, setuid. Both ways, nothing outside changes and the image is refused naming the lie.
  for (const keepOwnership of [false, true]) {
    it.skipIf(kind !== "erofs" || missing)(`lying-dirent-types (keepOwnership ${keepOwnership}): a symlink listed as a directory is refused before anything is extracted, and nothing outside changes${missing ? ` — SKIPPED: ${missing}` : ""}`, async () => {
      const outsideBefore = [hostOutside(), sandboxDir("workspace/outside")].map((d) => statSync(join(d, "sentinel")));
      const r = await agent("POST", "/v1/materialize", { archive: place(image("lying-dirent-types")), path: "/workspace/t", format, how: "extract", keepOwnership });
      expect(r.body.error, JSON.stringify(r.body)).toMatchObject({ code: "path_outside_root", field: "archive", message: expect.stringMatching(/lists "zevil" .* as a directory but its inode is a symlink/) });
      [hostOutside(), sandboxDir("workspace/outside")].forEach((d, i) => {
        const st = statSync(join(d, "sentinel"));
        expect({ mode: st.mode, nlink: st.nlink, uid: st.uid }, d).toEqual({ mode: outsideBefore[i]!.mode, nlink: 1, uid: outsideBefore[i]!.uid });
      });
      expect(readdirSync(sandboxDir("workspace/t"))).toEqual([]);
      untouched();
    });
  }

  const noRoot = process.getuid?.() !== 0 ? "mknod and chown need root" : undefined;
  it.skipIf(missing ?? noRoot)(`setuid-and-device: extracted, setuid/setgid are cleared, devices dropped and owners are the agent's${missing ?? noRoot ? ` — SKIPPED: ${missing ?? noRoot}` : ""}`, async () => {
    const r = await materialize(place(image("setuid-and-device")));
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(statSync(sandboxDir("workspace/t/suid")).mode & 0o7777).toBe(0o755);
    expect(existsSync(sandboxDir("workspace/t/null"))).toBe(false);
    expect(existsSync(sandboxDir("workspace/t/disk"))).toBe(false);
    for (const f of ["suid", "plain", "foreign"]) expect(statSync(sandboxDir(`workspace/t/${f}`)).uid, f).toBe(process.getuid!());
    untouched();
  });

  const fuseTool = kind === "squashfs" ? "squashfuse_ll" : "erofsfuse";
  const hasTool = (t: string) => spawnSync("sh", ["-c", `command -v ${t}`]).status === 0;
  const cannotMount = (how: string) =>
    missing ?? noRoot ?? (how === "mount-kernel" ? (!hasCapSysAdmin(readFileSync("/proc/self/status", "utf8")) || !readFileSync("/proc/filesystems", "utf8").includes(kind) ? `no kernel ${kind} mounts here` : undefined) : !existsSync("/dev/fuse") || !hasTool(fuseTool) ? `no /dev/fuse or ${fuseTool}` : undefined);
  for (const how of ["mount-kernel", "mount-fuse"]) {
    const why = cannotMount(how);
    it.skipIf(why)(`setuid-and-device: mounted (${how}), the mount is nosuid,nodev, its device node does not open, and nothing deletes what it stands on${why ? ` — SKIPPED: ${why}` : ""}`, async () => {
      const archive = place(image("setuid-and-device"));
      const r = await materialize(archive, how);
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      try {
        const mountPoint = sandboxDir("workspace/t");
        const line = readFileSync("/proc/self/mountinfo", "utf8").split("\n").find((l) => l.split(" ")[4] === mountPoint)!;
        const options = line.split(" ")[5]!.split(",");
        // FUSE mounts show their per-mount flags only; the kernel's image mounts are read-only as well.
        expect(options).toEqual(expect.arrayContaining(how === "mount-kernel" ? ["ro", "nosuid", "nodev"] : ["nosuid", "nodev"]));
        // The kernel's word, not just the flag: a device node on a nodev mount cannot be opened.
        expect(() => openSync(join(mountPoint, "null"), "r")).toThrow(/EACCES|EPERM/);
        // Deleting what the mount stands on is refused, through every route that deletes.
        for (const [method, path, body] of [
          ["DELETE", `/v1/files?path=${archive}`, undefined],
          ["DELETE", "/v1/files?path=/workspace", undefined],
          ["POST", "/v1/datasets", { path: "/workspace", kind: "tricky", replace: true }],
          ["POST", "/v1/remove", { path: "/workspace", entries: ["t"] }],
        ] as const) {
          const refused = await agent(method, path, body);
          expect(refused.status, `${method} ${path}`).toBe(400);
          expect(refused.body.error.message).toMatch(/unmount it first/);
        }
        expect(existsSync(sandboxDir(archive.slice(1)))).toBe(true);
      } finally {
        expect((await agent("DELETE", "/v1/mounts?path=/workspace/t")).status).toBe(200);
      }
      untouched();
    });
  }
});
