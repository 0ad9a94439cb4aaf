// Filesystem images through the real agent (container/http/server.ts in host mode, in-process on 127.0.0.1:0), driven
// over HTTP: the tricky dataset (with every entry's mtime moved to a distinct old second, so a builder that
// stamps its own time is caught) made into squashfs (zstd, lz4, lzo, gzip) and erofs (none, lz4, lz4hc) images,
// each materialized by extracting, by a kernel mount and by FUSE, and checked with /v1/verify against the
// source's manifest; a writable overlay over a FUSE-mounted base, unmounted in order; the mount registry; a
// dropped sandbox leaving nothing mounted; and bad input answered with the field at fault.
//
// Kernel mounts need root with CAP_SYS_ADMIN and the filesystem in /proc/filesystems, FUSE needs /dev/fuse and
// the tool; the tests that need what is missing are skipped and say why. afterAll unmounts anything left.
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { accessSync, constants, existsSync, lstatSync, lutimesSync, mkdtempSync, readdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseMountinfo } from "../../container/mounts/mounts.ts";
import { hasCapSysAdmin } from "../../container/system/probe.ts";
import type { ImageFormat } from "../../container/contract/protocol.ts";
import { agentTokenFor } from "../../container/contract/agent-token.ts";
import { createAgentServer } from "../../container/http/server.ts";

const SECRET = randomBytes(32).toString("hex");
let server: Server;
let base: string;
let sandboxesDir: string;
let url: string;
let counter = 0;
const fresh = (label: string) => `img-${label}-${process.pid}-${counter++}`;

// ---- what this machine can do ----
const onPath = (tool: string) => spawnSync("sh", ["-c", `command -v ${tool}`]).status === 0;
const filesystems = readFileSync("/proc/filesystems", "utf8").split("\n").map((l) => l.split("\t").pop()!.trim());
const capSysAdmin = hasCapSysAdmin(readFileSync("/proc/self/status", "utf8"));
const devFuse = (() => {
  try {
    accessSync("/dev/fuse", constants.R_OK | constants.W_OK);
    return true;
  } catch {
    return false;
  }
})();
/** Why a kernel mount of `fs` cannot be tested here, or undefined when it can. */
const noKernel = (fs: string) => (!capSysAdmin ? "no CAP_SYS_ADMIN" : !filesystems.includes(fs) ? `no ${fs} in /proc/filesystems` : undefined);
/** Why a FUSE mount with `tool` cannot be tested here, or undefined when it can. */
const noFuse = (tool: string) => (!devFuse ? "no /dev/fuse" : !onPath("fusermount3") ? "fusermount3 is not installed" : !onPath(tool) ? `${tool} is not installed` : undefined);
const skipped = (reason: string | undefined) => (reason ? ` — SKIPPED: ${reason}` : "");

function mountsBelow(dir: string) {
  return parseMountinfo(readFileSync("/proc/self/mountinfo", "utf8")).filter((m) => m.mountPoint === dir || m.mountPoint.startsWith(dir + "/"));
}

beforeAll(async () => {
  base = mkdtempSync(join(tmpdir(), "snapflow-images-"));
  sandboxesDir = join(base, "sandboxes");
  server = createAgentServer({ auth: { secret: SECRET }, sandboxesDir, storeOrigins: ["http://store.invalid"] });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  // Whatever a failed test left mounted: newest first, so overlays go before their lowers.
  for (const m of mountsBelow(base).reverse()) {
    const fuse = m.fstype.startsWith("fuse");
    spawnSync(fuse ? "fusermount3" : "umount", fuse ? ["-u", m.mountPoint] : [m.mountPoint]);
  }
  const left = mountsBelow(base);
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  if (left.length === 0) rmSync(base, { recursive: true, force: true });
  expect(left, "nothing stays mounted after the tests").toEqual([]);
});

async function call(sandbox: string, method: string, path: string, body?: unknown): Promise<Response> {
  const headers: Record<string, string> = { authorization: `Bearer ${await agentTokenFor(SECRET, sandbox)}`, "x-snapflow-sandbox": sandbox };
  if (body !== undefined && !(body instanceof Uint8Array)) headers["content-type"] = "application/json";
  const raw = body instanceof Uint8Array;
  return fetch(`${url}${path}`, { method, headers, body: body === undefined ? undefined : raw ? (body as BodyInit) : JSON.stringify(body) });
}

async function json(r: Response | Promise<Response>): Promise<{ status: number; body: any }> {
  const res = await r;
  return { status: res.status, body: await res.json() };
}

/** Moves every entry's mtime (and atime) to a distinct whole second in 2020, symlinks included. */
function age(root: string) {
  let i = 0;
  const walk = (dir: string) => {
    for (const name of readdirSync(dir).sort()) {
      const p = join(dir, name);
      const st = lstatSync(p);
      if (st.isDirectory()) walk(p);
      const t = 1_600_000_000 + 1000 * i++;
      if (st.isSymbolicLink()) lutimesSync(p, t, t);
      else utimesSync(p, t, t);
    }
  };
  walk(root);
}

// One source sandbox holds the dataset and every image made of it.
const SRC = fresh("src");
let expected: any;

beforeAll(async () => {
  const made = await json(call(SRC, "POST", "/v1/datasets", { path: "/workspace/app", kind: "tricky", seed: 7 }));
  expect(made.status).toBe(200);
  age(join(sandboxesDir, SRC, "workspace/app"));
  expected = (await json(call(SRC, "POST", "/v1/manifest", { path: "/workspace/app" }))).body;
  expect(expected.totals.symlinks).toBeGreaterThan(0);
  expect(expected.entries.some((e: any) => e.link)).toBe(true);
  expect(new Set(expected.entries.map((e: any) => e.mtime)).size).toBeGreaterThan(20);
});

/** Copies an image from the source sandbox into another (materializing happens where the image is). */
async function copyImage(from: string, path: string, to: string) {
  const bytes = new Uint8Array(await (await call(from, "GET", `/v1/files?path=${path}`)).arrayBuffer());
  expect((await call(to, "PUT", `/v1/files?path=${path}`, bytes)).status).toBe(200);
}

async function verifyEqual(sandbox: string, path: string) {
  const verify = await json(call(sandbox, "POST", "/v1/verify", { path, expected }));
  expect(verify.status).toBe(200);
  expect(verify.body.differences, `${path} differs from the source`).toEqual([]);
  expect(verify.body).toMatchObject({ equal: true, totals: expected.totals });
}

const CASES: { name: string; format: ImageFormat; fuseTool?: string }[] = [
  { name: "squashfs zstd level 3", format: { kind: "squashfs", compression: "zstd", level: 3 } },
  { name: "squashfs lz4 (-Xhc)", format: { kind: "squashfs", compression: "lz4", level: 9 } },
  { name: "squashfs lzo level 5, 64 KiB blocks", format: { kind: "squashfs", compression: "lzo", level: 5, blockSize: 65536 } },
  { name: "squashfs gzip", format: { kind: "squashfs", compression: "gzip" } },
  { name: "erofs none", format: { kind: "erofs", compression: "none" } },
  { name: "erofs lz4", format: { kind: "erofs", compression: "lz4" } },
  { name: "erofs lz4hc level 9", format: { kind: "erofs", compression: "lz4hc", level: 9 } },
];

const fuseToolFor = (kind: ImageFormat["kind"]) => (kind === "squashfs" ? (onPath("squashfuse_ll") ? "squashfuse_ll" : "squashfuse") : "erofsfuse");

for (const [n, { name, format }] of CASES.entries()) {
  const [maker, extractor] = format.kind === "squashfs" ? ["mksquashfs", "unsquashfs"] : ["mkfs.erofs", "fsck.erofs"];
  const image = `/snapflow/images/${n}.${format.kind}`;
  const noMaker = onPath(maker) ? undefined : `${maker} is not installed`;

  describe.skipIf(noMaker)(`${name}${skipped(noMaker)}`, () => {
    beforeAll(async () => {
      const made = await json(call(SRC, "POST", "/v1/image", { path: "/workspace/app", output: image, format }));
      expect(made.status, JSON.stringify(made.body)).toBe(200);
      const file = readFileSync(join(sandboxesDir, SRC, image));
      expect(made.body).toMatchObject({ bytes: file.length });
      expect(made.body.sha256).toMatch(/^[0-9a-f]{64}$/);
      // The 8 MiB sparse file is not stored as 8 MiB of zeros.
      expect(file.length).toBeLessThan(1 << 20);
    });

    const noExtract = onPath(extractor) ? undefined : `${extractor} is not installed`;
    it.skipIf(noExtract)(`extract with ${extractor}, verify equal${skipped(noExtract)}`, async () => {
      const sb = fresh("extract");
      await copyImage(SRC, image, sb);
      const r = await json(call(sb, "POST", "/v1/materialize", { archive: image, path: "/workspace/restored", format, how: "extract" }));
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      expect(r.body.mounted).toBeUndefined();
      await verifyEqual(sb, "/workspace/restored");
    });

    const noKernelMount = noKernel(format.kind);
    it.skipIf(noKernelMount)(`kernel mount, verify equal, unmount${skipped(noKernelMount)}`, async () => {
      const r = await json(call(SRC, "POST", "/v1/materialize", { archive: image, path: `/workspace/mnt-k${n}`, format, how: "mount-kernel" }));
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      expect(r.body.mounted).toMatchObject({ path: `/workspace/mnt-k${n}`, how: "mount-kernel", fstype: format.kind, source: image });
      await verifyEqual(SRC, `/workspace/mnt-k${n}`);
      expect(await json(call(SRC, "DELETE", `/v1/mounts?path=/workspace/mnt-k${n}`))).toEqual({ status: 200, body: { unmounted: [`/workspace/mnt-k${n}`] } });
      expect(mountsBelow(join(sandboxesDir, SRC, `workspace/mnt-k${n}`))).toEqual([]);
    });

    const fuseTool = fuseToolFor(format.kind);
    const noFuseMount = noFuse(fuseTool);
    it.skipIf(noFuseMount)(`FUSE mount (${fuseTool}), verify equal, unmount${skipped(noFuseMount)}`, async () => {
      const r = await json(call(SRC, "POST", "/v1/materialize", { archive: image, path: `/workspace/mnt-f${n}`, format, how: "mount-fuse" }));
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      expect(r.body.mounted).toMatchObject({ how: "mount-fuse", tool: fuseTool, fstype: `fuse.${fuseTool}` });
      await verifyEqual(SRC, `/workspace/mnt-f${n}`);
      expect((await call(SRC, "DELETE", `/v1/mounts?path=/workspace/mnt-f${n}`)).status).toBe(200);
      expect(mountsBelow(join(sandboxesDir, SRC, `workspace/mnt-f${n}`))).toEqual([]);
    });

    if (noFuseMount && devFuse && !onPath(fuseTool)) {
      it(`FUSE mount without ${fuseTool} is a 501 naming 'how'`, async () => {
        const r = await json(call(SRC, "POST", "/v1/materialize", { archive: image, path: `/workspace/mnt-f${n}`, format, how: "mount-fuse" }));
        expect(r.status).toBe(501);
        expect(r.body.error).toMatchObject({ code: "unavailable", field: "how" });
        expect(r.body.error.message).toContain(fuseTool);
      });
    }
  });
}

const SQUASHFS: ImageFormat = { kind: "squashfs", compression: "zstd", level: 3 };
const noSquashfuse = noFuse(fuseToolFor("squashfs")) ?? (onPath("mksquashfs") ? undefined : "mksquashfs is not installed");

describe("writable overlay over a FUSE-mounted base", () => {
  for (const how of ["kernel", "fuse"] as const) {
    const reason = noSquashfuse ?? (how === "kernel" ? noKernel("overlay") : noFuse("fuse-overlayfs"));
    it.skipIf(reason)(`${how} overlay: writes land in the upper dir, the lower stays as it was; unmounted overlay first${skipped(reason)}`, async () => {
      const sb = fresh(`overlay-${how}`);
      await copyImage(SRC, "/snapflow/images/0.squashfs", sb);
      const lower = await json(call(sb, "POST", "/v1/materialize", { archive: "/snapflow/images/0.squashfs", path: "/workspace/base", format: SQUASHFS, how: "mount-fuse" }));
      expect(lower.status, JSON.stringify(lower.body)).toBe(200);
      const ov = await json(call(sb, "POST", "/v1/overlay", { lower: "/workspace/base", path: "/workspace/app", how }));
      expect(ov.status, JSON.stringify(ov.body)).toBe(200);
      expect(ov.body.upper).toMatch(/^\/snapflow\/overlays\/[0-9a-f]{16}\/upper$/);
      expect(ov.body.mounted).toMatchObject({ kind: "overlay", how, source: "/workspace/base", upper: ov.body.upper });

      // The overlay shows the base, and is writable.
      await verifyEqual(sb, "/workspace/app");
      expect((await call(sb, "PUT", "/v1/files?path=/workspace/app/new-file.txt", new Uint8Array([104, 105]))).status).toBe(200);
      expect((await call(sb, "PUT", "/v1/files?path=/workspace/app/plain.txt", new Uint8Array([120]))).status).toBe(200);
      const upper = join(sandboxesDir, sb, ov.body.upper);
      expect(readFileSync(join(upper, "new-file.txt"), "utf8")).toBe("hi");
      expect(readFileSync(join(upper, "plain.txt"), "utf8")).toBe("x");
      expect(readdirSync(upper).sort()).toEqual(["new-file.txt", "plain.txt"]);
      // The read-only base is untouched, and the upper is a plain directory the tar endpoints can archive.
      await verifyEqual(sb, "/workspace/base");
      const archived = await call(sb, "GET", `/v1/archive?path=${ov.body.upper}&kind=tar&compression=none`);
      expect(archived.status).toBe(200);
      expect((await archived.arrayBuffer()).byteLength).toBeGreaterThan(0);

      const listed = await json(call(sb, "GET", "/v1/mounts"));
      expect(listed.body.mounts.map((m: any) => [m.path, m.kind])).toEqual([
        ["/workspace/base", "image"],
        ["/workspace/app", "overlay"],
      ]);
      // Unmounting the base takes the overlay on top of it down first.
      expect(await json(call(sb, "DELETE", "/v1/mounts?path=/workspace/base"))).toEqual({ status: 200, body: { unmounted: ["/workspace/app", "/workspace/base"] } });
      expect(mountsBelow(join(sandboxesDir, sb))).toEqual([]);
      expect((await json(call(sb, "GET", "/v1/mounts"))).body).toEqual({ mounts: [] });
      // The changes outlive the overlay.
      expect(readFileSync(join(upper, "new-file.txt"), "utf8")).toBe("hi");
      await call(sb, "DELETE", "/v1/sandbox");
    });
  }

  const noFuseOverlayfs = !onPath("fuse-overlayfs") && !noSquashfuse;
  it.skipIf(!noFuseOverlayfs)(`a FUSE overlay without fuse-overlayfs is a 501 naming 'how'${noFuseOverlayfs ? "" : " — SKIPPED: fuse-overlayfs is installed"}`, async () => {
    const sb = fresh("no-fuse-overlayfs");
    await call(sb, "PUT", "/v1/files?path=/workspace/base/a", new Uint8Array([1]));
    const r = await json(call(sb, "POST", "/v1/overlay", { lower: "/workspace/base", path: "/workspace/app", how: "fuse" }));
    expect(r.status).toBe(501);
    expect(r.body.error).toMatchObject({ code: "unavailable", field: "how" });
    expect(r.body.error.message).toContain("fuse-overlayfs");
  });
});

describe("the mount registry", () => {
  const reason = noSquashfuse ?? noKernel("squashfs");
  it.skipIf(reason)(`GET /v1/mounts lists this sandbox's mounts, forgets unmounted and vanished ones${skipped(reason)}`, async () => {
    const sb = fresh("registry");
    const other = fresh("registry-other");
    await copyImage(SRC, "/snapflow/images/0.squashfs", sb);
    const mount = (path: string, how: string) =>
      json(call(sb, "POST", "/v1/materialize", { archive: "/snapflow/images/0.squashfs", path, format: SQUASHFS, how }));
    expect((await mount("/workspace/k", "mount-kernel")).status).toBe(200);
    expect((await mount("/workspace/f", "mount-fuse")).status).toBe(200);

    const listed = await json(call(sb, "GET", "/v1/mounts"));
    expect(listed.status).toBe(200);
    expect(listed.body.mounts).toEqual([
      expect.objectContaining({ path: "/workspace/k", kind: "image", source: "/snapflow/images/0.squashfs", how: "mount-kernel", tool: "mount", fstype: "squashfs" }),
      expect.objectContaining({ path: "/workspace/f", kind: "image", how: "mount-fuse", fstype: expect.stringMatching(/^fuse\./) }),
    ]);
    expect(Date.parse(listed.body.mounts[0].since)).toBeGreaterThan(Date.now() - 60_000);
    // Another sandbox sees none of them.
    expect((await json(call(other, "GET", "/v1/mounts"))).body).toEqual({ mounts: [] });
    // Deleting through a mount (the mount point, or a directory above it) is refused, and the mount stays.
    for (const path of ["/workspace/f", "/workspace"]) {
      const refused = await json(call(sb, "DELETE", `/v1/files?path=${path}`));
      expect(refused.status).toBe(400);
      expect(refused.body.error).toMatchObject({ field: "path", message: expect.stringContaining("unmount it first") });
    }
    expect((await json(call(sb, "GET", "/v1/mounts"))).body.mounts).toHaveLength(2);

    expect(await json(call(sb, "DELETE", "/v1/mounts?path=/workspace/f"))).toEqual({ status: 200, body: { unmounted: ["/workspace/f"] } });
    expect((await json(call(sb, "GET", "/v1/mounts"))).body.mounts.map((m: any) => m.path)).toEqual(["/workspace/k"]);
    // Unmounted behind the agent's back: dropped from the list.
    expect(spawnSync("umount", [join(sandboxesDir, sb, "workspace/k")]).status).toBe(0);
    expect((await json(call(sb, "GET", "/v1/mounts"))).body).toEqual({ mounts: [] });
    const gone = await json(call(sb, "DELETE", "/v1/mounts?path=/workspace/k"));
    expect(gone.status).toBe(404);
    expect(gone.body.error.field).toBe("path");
  });

  it.skipIf(reason ?? noKernel("overlay"))(`POST /v1/clear takes down what a retry finds (dependants first, nothing there is fine), then deletes; the same overlay over a kept upper is not stacked twice${skipped(reason ?? noKernel("overlay"))}`, async () => {
    const sb = fresh("clear");
    await copyImage(SRC, "/snapflow/images/0.squashfs", sb);
    expect((await json(call(sb, "POST", "/v1/materialize", { archive: "/snapflow/images/0.squashfs", path: "/workspace/base", format: SQUASHFS, how: "mount-fuse" }))).status).toBe(200);
    await call(sb, "PUT", "/v1/files?path=/snapflow/layer/upper/kept.txt", new Uint8Array([107]));
    const overlay = { lower: "/workspace/base", path: "/workspace/app", how: "kernel", upper: "/snapflow/layer/upper" };
    const first = await json(call(sb, "POST", "/v1/overlay", overlay));
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    // Asked again (a retried step): the overlay standing there is the answer, one mount, the upper as it was.
    const again = await json(call(sb, "POST", "/v1/overlay", overlay));
    expect(again.status, JSON.stringify(again.body)).toBe(200);
    expect(again.body.mounted).toEqual(first.body.mounted);
    const root = join(sandboxesDir, sb);
    expect(mountsBelow(root).map((m) => m.mountPoint)).toEqual([join(root, "workspace/base"), join(root, "workspace/app")]);
    expect(readFileSync(join(root, "snapflow/layer/upper/kept.txt"), "utf8")).toBe("k");
    // Without a kept upper it is a fresh layer each time: a second one over a mount point is refused, not stacked.
    expect((await json(call(sb, "POST", "/v1/overlay", { ...overlay, upper: undefined }))).status).toBe(400);

    // Clearing through a mount is refused before anything is deleted, naming the entry.
    const refused = await json(call(sb, "POST", "/v1/clear", { remove: ["/snapflow/layer"] }));
    expect(refused.status).toBe(400);
    expect(refused.body.error.field).toBe("remove[0]");
    expect(existsSync(join(root, "snapflow/layer/upper/kept.txt"))).toBe(true);
    // The base (the overlay on it first), a path with nothing mounted, then the files.
    const cleared = await json(call(sb, "POST", "/v1/clear", { unmount: ["/workspace/base", "/workspace/nothing-here"], remove: ["/workspace/app", "/snapflow/layer"] }));
    expect(cleared.status, JSON.stringify(cleared.body)).toBe(200);
    expect(cleared.body).toMatchObject({ unmounted: ["/workspace/app", "/workspace/base"], removed: 2 });
    expect(mountsBelow(root)).toEqual([]);
    expect(existsSync(join(root, "workspace/app")) || existsSync(join(root, "snapflow/layer"))).toBe(false);
    // The base's mount went, its empty directory stayed: an overlay that needs a mounted lower refuses it.
    expect(existsSync(join(root, "workspace/base"))).toBe(true);
    const unmountedLower = await json(call(sb, "POST", "/v1/overlay", { ...overlay, lowerMounted: true }));
    expect(unmountedLower.status).toBe(404);
    expect(unmountedLower.body.error.field).toBe("lower");
    expect(mountsBelow(root)).toEqual([]);
    const escaping = await json(call(sb, "POST", "/v1/clear", { unmount: ["/workspace/../../etc"] }));
    expect(escaping.status).toBe(400);
    expect(escaping.body.error.field).toBe("unmount[0]");
    await call(sb, "DELETE", "/v1/sandbox");
  });

  it.skipIf(reason)(`DELETE /v1/sandbox unmounts everything (overlay first) and leaves nothing in mountinfo${skipped(reason)}`, async () => {
    const sb = fresh("drop");
    await copyImage(SRC, "/snapflow/images/0.squashfs", sb);
    const mount = (path: string, how: string) =>
      json(call(sb, "POST", "/v1/materialize", { archive: "/snapflow/images/0.squashfs", path, format: SQUASHFS, how }));
    expect((await mount("/workspace/k", "mount-kernel")).status).toBe(200);
    expect((await mount("/workspace/base", "mount-fuse")).status).toBe(200);
    const overlayHow = noKernel("overlay") ? "fuse" : "kernel";
    const ov = await json(call(sb, "POST", "/v1/overlay", { lower: "/workspace/base", path: "/workspace/app", how: overlayHow }));
    expect(ov.status, JSON.stringify(ov.body)).toBe(200);
    const root = join(sandboxesDir, sb);
    expect(mountsBelow(root)).toHaveLength(3);

    const dropped = await json(call(sb, "DELETE", "/v1/sandbox"));
    expect(dropped.status, JSON.stringify(dropped.body)).toBe(200);
    expect(dropped.body.deleted).toBe(sb);
    expect(dropped.body.unmounted.indexOf("/workspace/app")).toBeLessThan(dropped.body.unmounted.indexOf("/workspace/base"));
    expect(mountsBelow(root)).toEqual([]);
    expect(existsSync(root)).toBe(false);
  });
});

describe("bad input names the field", () => {
  const noMksquashfs = onPath("mksquashfs") ? undefined : "mksquashfs is not installed";
  it.skipIf(noMksquashfs)(`image and materialize refuse what they cannot do, naming the field${skipped(noMksquashfs)}`, async () => {
    const sb = fresh("bad");
    await copyImage(SRC, "/snapflow/images/0.squashfs", sb);
    writeFileSync(join(sandboxesDir, sb, "snapflow/not-an-image"), "just text, long enough to read a header from ".repeat(40));
    await call(sb, "PUT", "/v1/files?path=/workspace/full/file.txt", new Uint8Array([1]));
    const cases: [string, string, unknown, number, string][] = [
      ["missing archive", "/v1/materialize", { archive: "/snapflow/nope.squashfs", path: "/workspace/x", format: SQUASHFS, how: "extract" }, 404, "archive"],
      ["archive outside the roots", "/v1/materialize", { archive: "/etc/passwd", path: "/workspace/x", format: SQUASHFS, how: "extract" }, 400, "archive"],
      ["not an image", "/v1/materialize", { archive: "/snapflow/not-an-image", path: "/workspace/x", format: SQUASHFS, how: "extract" }, 400, "archive"],
      ["squashfs called erofs", "/v1/materialize", { archive: "/snapflow/images/0.squashfs", path: "/workspace/x", format: { kind: "erofs", compression: "lz4" }, how: "extract" }, 400, "format.kind"],
      ["zstd called gzip", "/v1/materialize", { archive: "/snapflow/images/0.squashfs", path: "/workspace/x", format: { kind: "squashfs", compression: "gzip" }, how: "extract" }, 400, "format.compression"],
      ["non-empty mount target", "/v1/materialize", { archive: "/snapflow/images/0.squashfs", path: "/workspace/full", format: SQUASHFS, how: "mount-kernel" }, 400, "path"],
      ["a file as mount target", "/v1/materialize", { archive: "/snapflow/images/0.squashfs", path: "/workspace/full/file.txt", format: SQUASHFS, how: "mount-fuse" }, 400, "path"],
      ["unknown how", "/v1/materialize", { archive: "/snapflow/images/0.squashfs", path: "/workspace/x", format: SQUASHFS, how: "teleport" }, 400, "how"],
      ["xz has no level", "/v1/image", { path: "/workspace/full", output: "/snapflow/o.sqfs", format: { kind: "squashfs", compression: "xz", level: 5 } }, 400, "format.level"],
      ["gzip level 12", "/v1/image", { path: "/workspace/full", output: "/snapflow/o.sqfs", format: { kind: "squashfs", compression: "gzip", level: 12 } }, 400, "format.level"],
      ["erofs lz4 has no level", "/v1/image", { path: "/workspace/full", output: "/snapflow/o.erofs", format: { kind: "erofs", compression: "lz4", level: 3 } }, 400, "format.level"],
      ["block size not a power of two", "/v1/image", { path: "/workspace/full", output: "/snapflow/o.sqfs", format: { kind: "squashfs", compression: "zstd", blockSize: 100000 } }, 400, "format.blockSize"],
      ["output inside the tree", "/v1/image", { path: "/workspace/full", output: "/workspace/full/o.sqfs", format: SQUASHFS }, 400, "output"],
      ["missing tree", "/v1/image", { path: "/workspace/none", output: "/snapflow/o.sqfs", format: SQUASHFS }, 404, "path"],
      ["missing lower", "/v1/overlay", { lower: "/workspace/none", path: "/workspace/ov", how: "kernel" }, 404, "lower"],
      ["overlay on a non-empty path", "/v1/overlay", { lower: "/workspace/full", path: "/workspace/full", how: "kernel" }, 400, "path"],
    ];
    for (const [what, path, body, status, field] of cases) {
      const r = await json(call(sb, "POST", path, body));
      expect(r.status, `${what}: ${JSON.stringify(r.body)}`).toBe(status);
      expect(r.body.error.field, what).toBe(field);
    }
    const nothing = await json(call(sb, "DELETE", "/v1/mounts?path=/workspace/full"));
    expect(nothing.status).toBe(404);
    expect(nothing.body.error.field).toBe("path");
    expect(mountsBelow(join(sandboxesDir, sb))).toEqual([]);
    await call(sb, "DELETE", "/v1/sandbox");
  });
});
