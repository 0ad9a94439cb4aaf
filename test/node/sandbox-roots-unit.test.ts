// Configured sandbox roots (container/contract/sandbox-roots.ts): the defaults the Sandbox SDK allows, a configured list
// replacing them, and every refusal — a bad root in the configuration, and paths that are outside the roots, at
// /, /proc, /sys, /dev, that escape through '..', or through a symlink (on a real temporary sandbox root).
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { normalizeSandboxPath } from "../../container/contract/protocol.ts";
import { DEFAULT_USER_ROOTS } from "../../container/contract/sandbox-layout.ts";
import { resolveSandboxPath } from "../../container/system/path-confinement.ts";
import { configuredRoots, parseRoots, sandboxRoots, useSandboxRoots } from "../../container/contract/sandbox-roots.ts";

afterEach(() => useSandboxRoots(DEFAULT_USER_ROOTS));

describe("parseRoots", () => {
  it("absent or empty: the SDK's defaults; snapflow's area is always the agent's too", () => {
    expect(parseRoots(undefined)).toEqual({ ok: true, roots: ["/workspace", "/home", "/app", "/tmp", "/var/tmp"] });
    expect(parseRoots(" , ")).toEqual({ ok: true, roots: [...DEFAULT_USER_ROOTS] });
    expect(sandboxRoots()).toEqual([...DEFAULT_USER_ROOTS, "/snapflow"]);
  });

  it("a configured list replaces the defaults", () => {
    expect(parseRoots("/data, /workspace ,/data")).toEqual({ ok: true, roots: ["/data", "/workspace"] });
  });

  it.each([
    ["/", /whole filesystem/],
    ["/workspace,/", /whole filesystem/],
    ["/proc", /\/proc/],
    ["/proc/self", /\/proc/],
    ["/sys/fs", /\/sys/],
    ["/dev", /\/dev/],
    ["/dev/shm", /\/dev/],
    ["/snapflow", /snapflow's own area/],
    ["/snapflow/staging", /snapflow's own area/],
    ["workspace", /absolute/],
    ["/workspace/../etc", /normal path/],
    ["/workspace/", /normal path/],
    ["/work//space", /normal path/],
  ])("refuses the root %j", (text, reason) => {
    const r = parseRoots(text);
    expect(r.ok).toBe(false);
    expect(!r.ok && r.reason).toMatch(reason);
  });
});

describe("paths under the roots", () => {
  it.each(["/workspace/app", "/home/user/project", "/app", "/tmp/build", "/var/tmp/cache", "/snapflow/staging/x.tar"])("accepts %j by default", (p) => {
    expect(normalizeSandboxPath(p)).toEqual({ ok: true, path: p });
  });

  it.each(["/", "/proc", "/proc/1/root", "/sys/kernel", "/dev/null", "/etc/passwd", "/var/log", "/tmpx", "/homework", "/tmp/../etc", "/home/../proc"])("refuses %j as outside the roots", (p) => {
    expect(normalizeSandboxPath(p)).toMatchObject({ ok: false, outside: true });
  });

  it("follows the configured roots", () => {
    useSandboxRoots(["/data"]);
    expect(configuredRoots()).toEqual(["/data"]);
    expect(normalizeSandboxPath("/data/set")).toEqual({ ok: true, path: "/data/set" });
    expect(normalizeSandboxPath("/workspace/app")).toMatchObject({ ok: false, outside: true });
    // snapflow's own area stays the agent's whatever is configured.
    expect(normalizeSandboxPath("/snapflow/staging")).toMatchObject({ ok: true });
  });
});

describe("symlink escapes from the new roots", () => {
  let base: string;
  let hostRoot: string;
  beforeAll(() => {
    base = mkdtempSync(join(tmpdir(), "snapflow-roots-"));
    hostRoot = join(base, "sandbox");
    for (const r of ["tmp", "home/u", "workspace", "etc"]) mkdirSync(join(hostRoot, r), { recursive: true });
    symlinkSync("/etc", join(hostRoot, "tmp/host-etc")); // absolute: the host's /etc
    symlinkSync("../etc", join(hostRoot, "tmp/sandbox-etc")); // the sandbox's /etc, which is no root
    symlinkSync("../../workspace", join(hostRoot, "home/u/ws")); // into another allowed root: fine
  });
  afterAll(() => rmSync(base, { recursive: true, force: true }));

  it.each(["/tmp/host-etc", "/tmp/host-etc/passwd", "/tmp/sandbox-etc/new-file"])("refuses %j", async (p) => {
    await expect(resolveSandboxPath({ hostRoot }, p, "path")).rejects.toMatchObject({ code: "path_outside_root", field: "path" });
  });

  it("allows a symlink from one allowed root into another", async () => {
    expect(await resolveSandboxPath({ hostRoot }, "/home/u/ws/app", "path")).toBe(join(hostRoot, "home/u/ws/app"));
  });
});
