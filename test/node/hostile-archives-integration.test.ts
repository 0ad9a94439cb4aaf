// Hostile archives against the real agent (in-process, host mode) and real GNU tar, each test named after the
// attack it tries, as node-tar names its tests after advisories. Every archive is made here (Python's tarfile
// writes what tar itself refuses to create). Each test keeps a sentinel outside the sandbox and checks, after the
// attack, that it and the target's parent are unchanged.
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { agentTokenFor } from "../../container/agent-token.ts";
import { createAgentServer } from "../../container/server.ts";

const SECRET = randomBytes(32).toString("hex");
let base: string;
let outside: string;
let server: Server;
let url: string;
let n = 0;
let sb: string;
const SENTINEL = "sentinel: must not change";

/** An entry for Python's tarfile: type f (file), d, l (symlink), h (hard link), c (char device). */
type Entry = { name: string; type: "f" | "d" | "l" | "h" | "c"; data?: string; link?: string; mode?: number };

function tarOf(entries: Entry[]): Uint8Array {
  const py = `
import io, json, sys, tarfile
out = io.BytesIO()
with tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT) as t:
    for e in json.load(sys.stdin):
        i = tarfile.TarInfo(e["name"]); i.mtime = 1700000000; i.mode = e.get("mode", 0o644)
        kind = e["type"]
        if kind == "d": i.type = tarfile.DIRTYPE; i.mode = e.get("mode", 0o755)
        elif kind == "l": i.type = tarfile.SYMTYPE; i.linkname = e["link"]
        elif kind == "h": i.type = tarfile.LNKTYPE; i.linkname = e["link"]
        elif kind == "c": i.type = tarfile.CHRTYPE; i.devmajor = 1; i.devminor = 3
        data = e.get("data", "").encode()
        if kind == "f": i.size = len(data)
        t.addfile(i, io.BytesIO(data) if kind == "f" else None)
sys.stdout.buffer.write(out.getvalue())
`;
  return new Uint8Array(execFileSync("python3", ["-c", py], { input: JSON.stringify(entries) }));
}

const sandboxDir = (p = "") => join(base, "sandboxes", sb, p);

async function agent(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const raw = body instanceof Uint8Array;
  const r = await fetch(`${url}${path}`, {
    method,
    headers: { authorization: `Bearer ${await agentTokenFor(SECRET, sb)}`, "x-snapflow-sandbox": sb, ...(body !== undefined && !raw ? { "content-type": "application/json" } : {}) },
    body: body === undefined ? undefined : raw ? (body as BodyInit) : JSON.stringify(body),
  });
  return { status: r.status, body: await r.json() };
}

const extract = (archive: Uint8Array, path = "/workspace/t") => agent("PUT", `/v1/extract?path=${path}&kind=tar&compression=none`, archive);

/** The sentinel and the target's parent as they were. */
function untouched(parentBefore: string[]) {
  expect(readFileSync(join(outside, "sentinel"), "utf8")).toBe(SENTINEL);
  expect(readdirSync(outside).sort()).toEqual(["sentinel"]);
  expect(readdirSync(sandboxDir("workspace")).sort()).toEqual(parentBefore);
}

beforeAll(async () => {
  base = mkdtempSync(join(tmpdir(), "snapflow-hostile-"));
  outside = join(base, "outside");
  server = createAgentServer({ auth: { secret: SECRET }, sandboxesDir: join(base, "sandboxes"), storeOrigins: ["http://store.invalid"] });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
  rmSync(base, { recursive: true, force: true });
});
beforeEach(async () => {
  sb = `hostile-${n++}`;
  rmSync(outside, { recursive: true, force: true });
  mkdirSync(outside, { recursive: true });
  writeFileSync(join(outside, "sentinel"), SENTINEL);
  await agent("GET", "/v1/stat?path=/workspace"); // makes the sandbox's roots
});

describe("tar: one archive", () => {
  it("absolute-path: /abs/evil lands inside the target, if anywhere", async () => {
    const r = await extract(tarOf([{ name: join(outside, "abs-evil"), type: "f", data: "x" }]));
    expect(r.status, JSON.stringify(r.body)).toBeLessThan(600);
    untouched(["t"]);
    expect(existsSync(join(outside, "abs-evil"))).toBe(false);
  });

  it("dot-dot: ../../../outside/evil is refused or kept inside", async () => {
    await extract(tarOf([{ name: "../../../../../../outside/dotdot-evil", type: "f", data: "x" }, { name: "ok.txt", type: "f", data: "ok" }]));
    untouched(["t"]);
  });

  it("hard-link-out: a hard link to a file outside, then a write through it, changes nothing outside", async () => {
    await extract(tarOf([
      { name: "link", type: "h", link: join(outside, "sentinel") },
      { name: "link", type: "f", data: "overwritten through a hard link" },
      { name: "rel-link", type: "h", link: "../../../../../../outside/sentinel" },
      { name: "rel-link", type: "f", data: "overwritten through a hard link" },
    ]));
    untouched(["t"]);
  });

  it("symlink-then-file: x -> outside, then x/evil, writes nothing outside", async () => {
    await extract(tarOf([{ name: "x", type: "l", link: outside }, { name: "x/evil", type: "f", data: "x" }]));
    untouched(["t"]);
  });

  it("setuid-and-device: setuid/setgid bits are cleared and device nodes are not created", async () => {
    const r = await extract(tarOf([{ name: "suid", type: "f", data: "#!/bin/sh\n", mode: 0o6755 }, { name: "null", type: "c" }, { name: "plain", type: "f", data: "p", mode: 0o640 }]));
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(statSync(sandboxDir("workspace/t/suid")).mode & 0o7777).toBe(0o755);
    expect(statSync(sandboxDir("workspace/t/plain")).mode & 0o7777).toBe(0o640);
    expect(existsSync(sandboxDir("workspace/t/null"))).toBe(false);
    // Owners are not the archive's either (tar --no-same-owner): whoever runs the agent owns what it restored.
    expect(statSync(sandboxDir("workspace/t/plain")).uid).toBe(process.getuid!());
    untouched(["t"]);
  });
});

describe("tar: layers", () => {
  it("delta-through-base-symlink: a base's x -> outside, then a layer holding only x/evil, writes nothing outside", async () => {
    expect((await extract(tarOf([{ name: "x", type: "l", link: outside }, { name: "keep.txt", type: "f", data: "base" }]))).status).toBe(200);
    expect(lstatSync(sandboxDir("workspace/t/x")).isSymbolicLink()).toBe(true);
    const layer = await extract(tarOf([{ name: "x/evil", type: "f", data: "through the base's symlink" }]));
    expect(layer.status, JSON.stringify(layer.body)).toBe(200);
    untouched(["t"]);
    // The layer's x/evil is in the tree, in a real directory that replaced the symlink; the base's file stays.
    expect(lstatSync(sandboxDir("workspace/t/x")).isDirectory()).toBe(true);
    expect(readFileSync(sandboxDir("workspace/t/x/evil"), "utf8")).toBe("through the base's symlink");
    expect(readFileSync(sandboxDir("workspace/t/keep.txt"), "utf8")).toBe("base");
    // Nothing of the staging is left behind.
    expect(readdirSync(sandboxDir("workspace/t")).sort()).toEqual(["keep.txt", "x"]);
  });

  it("delta-through-sandbox-symlink: a symlink the sandbox's own code planted in the target is not followed either", async () => {
    mkdirSync(sandboxDir("workspace/t"), { recursive: true });
    symlinkSync(join(outside), sandboxDir("workspace/t/planted"));
    expect((await extract(tarOf([{ name: "planted/sentinel", type: "f", data: "overwrite" }]))).status).toBe(200);
    untouched(["t"]);
  });
});

describe("deletion lists", () => {
  it("hostile-deletion-list: entries through a symlink are skipped, '..' and absolute entries refused", async () => {
    mkdirSync(sandboxDir("workspace/t/real"), { recursive: true });
    writeFileSync(sandboxDir("workspace/t/real/gone.txt"), "delete me");
    symlinkSync(outside, sandboxDir("workspace/t/x"));
    const r = await agent("POST", "/v1/remove", { path: "/workspace/t", entries: ["x/sentinel", "real/gone.txt"] });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body).toEqual({ removed: 1, skipped: ["x/sentinel"] });
    expect(existsSync(sandboxDir("workspace/t/real/gone.txt"))).toBe(false);
    for (const [entries, field] of [[["../../../../outside/sentinel"], "entries.0"], [["ok", join(outside, "sentinel")], "entries.1"]] as const) {
      const bad = await agent("POST", "/v1/remove", { path: "/workspace/t", entries });
      expect(bad.status).toBe(400);
      expect(bad.body.error.field).toBe(field);
    }
    // The last component may be a symlink: it is removed itself, not what it points to.
    const last = await agent("POST", "/v1/remove", { path: "/workspace/t", entries: ["x"] });
    expect(last.body).toEqual({ removed: 1, skipped: [] });
    untouched(["t"]);
  });
});

describe("images", () => {
  it.skipIf(!existsSync("/usr/bin/mksquashfs") && !existsSync("/usr/sbin/mksquashfs"))("squashfs-through-base-symlink: an image extracted over a tree with x -> outside writes nothing outside", async () => {
    const src = join(base, `img-src-${sb}`);
    mkdirSync(join(src, "x"), { recursive: true });
    writeFileSync(join(src, "x/evil"), "from the image");
    writeFileSync(join(src, "setuid"), "s");
    execFileSync("chmod", ["4755", join(src, "setuid")]);
    mkdirSync(sandboxDir("snapflow/images"), { recursive: true });
    execFileSync("mksquashfs", [src, sandboxDir("snapflow/images/i.sqsh"), "-noappend", "-quiet"]);
    mkdirSync(sandboxDir("workspace/t"), { recursive: true });
    symlinkSync(outside, sandboxDir("workspace/t/x"));
    const r = await agent("POST", "/v1/materialize", { archive: "/snapflow/images/i.sqsh", path: "/workspace/t", format: { kind: "squashfs", compression: "gzip" }, how: "extract" });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    untouched(["t"]);
    expect(readFileSync(sandboxDir("workspace/t/x/evil"), "utf8")).toBe("from the image");
    expect(statSync(sandboxDir("workspace/t/setuid")).mode & 0o7000).toBe(0);
  });
});
