// Path confinement: the pure syntax check (normalizeSandboxPath in container/contract/protocol.ts, checkSandboxPath) and
// resolveSandboxPath (container/system/path-confinement.ts) on a real temporary sandbox root with real symlinks: escapes
// through '..', absolute paths, symlinks to the host and dangling symlinks are refused; ordinary and
// not-yet-existing paths map below the sandbox's root. And the layout both sides share (container/contract/sandbox-layout.ts):
// every area and built path is a normal sandbox path inside snapflow's own root, never the user's tree.
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AgentError } from "../../container/http/agent-error.ts";
import { normalizeSandboxPath } from "../../container/contract/protocol.ts";
import { datasetMarkerPath, deltaListPath, imagePath, mountPath, overlayLayer, SANDBOX_DIRS, stagingPath } from "../../container/contract/sandbox-layout.ts";
import { checkSandboxPath, resolveSandboxPath } from "../../container/system/path-confinement.ts";

describe("normalizeSandboxPath", () => {
  it.each([
    ["/workspace", "/workspace"],
    ["/workspace/app", "/workspace/app"],
    ["/workspace/app/", "/workspace/app"],
    ["/workspace/app///", "/workspace/app"],
    ["//workspace//app/./src/.", "/workspace/app/src"],
    ["/snapflow/staging/a.tar.zst", "/snapflow/staging/a.tar.zst"],
    ["/workspace/..hidden/x..y", "/workspace/..hidden/x..y"],
  ])("accepts %j as %j", (input, normal) => {
    expect(normalizeSandboxPath(input)).toEqual({ ok: true, path: normal });
  });

  it.each([
    ["/workspace/../etc/passwd"],
    ["/workspace/app/../../etc"],
    ["/workspace/app/.."], // even one that would stay inside: '..' is never resolved
    ["/etc"],
    ["/etc/passwd"],
    ["/"],
    ["/workspacex/app"], // a sibling that merely starts with an allowed root's name
    ["/snapflowx"],
    ["/root/workspace"],
  ])("refuses %j as outside the roots", (input) => {
    const r = normalizeSandboxPath(input);
    expect(r).toMatchObject({ ok: false, outside: true });
  });

  it.each([
    ["", /empty/],
    ["workspace/app", /absolute/],
    ["./workspace/app", /absolute/],
    ["../workspace", /absolute/],
    ["/workspace/a\0b", /NUL/],
  ])("refuses %j as malformed (not an escape)", (input, reason) => {
    const r = normalizeSandboxPath(input);
    expect(r).toMatchObject({ ok: false, outside: false });
    expect(!r.ok && r.reason).toMatch(reason);
  });
});

describe("checkSandboxPath", () => {
  const error = (f: () => unknown): AgentError => {
    try {
      f();
    } catch (e) {
      return e as AgentError;
    }
    throw new Error("did not throw");
  };

  it("returns the normalised path", () => {
    expect(checkSandboxPath("/workspace//app/", "path")).toBe("/workspace/app");
  });

  it("names the field, with path_outside_root for escapes and bad_request otherwise", () => {
    const escape = error(() => checkSandboxPath("/workspace/../etc", "output"));
    expect(escape).toBeInstanceOf(AgentError);
    expect(escape).toMatchObject({ code: "path_outside_root", status: 400, field: "output" });
    expect(escape.message).toMatch(/^output /);
    expect(error(() => checkSandboxPath("relative/path", "archive"))).toMatchObject({ code: "bad_request", status: 400, field: "archive" });
    expect(error(() => checkSandboxPath(undefined, "path"))).toMatchObject({ code: "bad_request", field: "path", message: "path is required" });
    expect(error(() => checkSandboxPath(42, "path"))).toMatchObject({ code: "bad_request", field: "path" });
  });
});

describe("resolveSandboxPath on a real sandbox root", () => {
  let base: string;
  let hostRoot: string;

  beforeAll(() => {
    base = mkdtempSync(join(tmpdir(), "snapflow-paths-"));
    hostRoot = join(base, "sandbox");
    mkdirSync(join(hostRoot, "workspace/app/src"), { recursive: true });
    mkdirSync(join(hostRoot, "snapflow/staging"), { recursive: true });
    mkdirSync(join(base, "outside"), { recursive: true });
    const ws = join(hostRoot, "workspace");
    symlinkSync("/etc", join(ws, "etc-link")); // absolute, to the host's /etc
    symlinkSync("../../..", join(ws, "up-link")); // relative, climbs out of the root
    symlinkSync("..", join(ws, "root-link")); // to the sandbox root itself, which is no allowed root
    symlinkSync(join(base, "outside/not-yet"), join(ws, "dangling-out")); // dangling, target outside
    symlinkSync("app/src", join(ws, "src-link")); // stays inside: fine
    symlinkSync("../snapflow/staging", join(ws, "staging-link")); // into the other allowed root: fine
    // A sandbox root that is itself reached through a symlink (as /tmp may be) still works.
    symlinkSync(hostRoot, join(base, "root-alias"));
  });
  afterAll(() => rmSync(base, { recursive: true, force: true }));

  const refusal = async (root: string, path: string, field = "path") => {
    const e = await resolveSandboxPath({ hostRoot: root }, path, field).then(
      (ok) => {
        throw new Error(`${path} resolved to ${ok}`);
      },
      (e) => e,
    );
    expect(e).toBeInstanceOf(AgentError);
    return e as AgentError;
  };

  it("maps an existing path below hostRoot", async () => {
    expect(await resolveSandboxPath({ hostRoot }, "/workspace/app/src/", "path")).toBe(join(hostRoot, "workspace/app/src"));
  });

  it("allows a path that does not exist yet below a normal directory, mapped under hostRoot", async () => {
    expect(await resolveSandboxPath({ hostRoot }, "/workspace/app/new/deeper/file.txt", "path")).toBe(join(hostRoot, "workspace/app/new/deeper/file.txt"));
    expect(await resolveSandboxPath({ hostRoot }, "/snapflow/staging/next.tar.zst", "output")).toBe(join(hostRoot, "snapflow/staging/next.tar.zst"));
  });

  it("allows symlinks that stay inside the allowed roots", async () => {
    expect(await resolveSandboxPath({ hostRoot }, "/workspace/src-link", "path")).toBe(join(hostRoot, "workspace/src-link"));
    expect(await resolveSandboxPath({ hostRoot }, "/workspace/staging-link/x", "path")).toBe(join(hostRoot, "workspace/staging-link/x"));
  });

  it("refuses a symlink to the host's /etc, the link itself and below it", async () => {
    for (const p of ["/workspace/etc-link", "/workspace/etc-link/passwd", "/workspace/etc-link/not-there/x"]) {
      expect(await refusal(hostRoot, p, "archive")).toMatchObject({ code: "path_outside_root", status: 400, field: "archive" });
    }
  });

  it("refuses a symlink to ../../.. and one to the sandbox root (which is no allowed root)", async () => {
    expect(await refusal(hostRoot, "/workspace/up-link")).toMatchObject({ code: "path_outside_root", field: "path" });
    expect(await refusal(hostRoot, "/workspace/up-link/new-file")).toMatchObject({ code: "path_outside_root" });
    expect(await refusal(hostRoot, "/workspace/root-link")).toMatchObject({ code: "path_outside_root" });
    expect(await refusal(hostRoot, "/workspace/root-link/etc/new")).toMatchObject({ code: "path_outside_root" });
    // What is judged is where a path really leads: back into an allowed root through the same link is fine.
    expect(await resolveSandboxPath({ hostRoot }, "/workspace/root-link/workspace/app", "path")).toBe(join(hostRoot, "workspace/root-link/workspace/app"));
  });

  it("refuses a dangling symlink whose target is outside (writing through it would create the target)", async () => {
    expect(await refusal(hostRoot, "/workspace/dangling-out")).toMatchObject({ code: "path_outside_root", field: "path" });
    expect(await refusal(hostRoot, "/workspace/dangling-out/child")).toMatchObject({ code: "path_outside_root" });
  });

  it("refuses syntactic escapes before touching the disk", async () => {
    expect(await refusal(hostRoot, "/workspace/../../etc")).toMatchObject({ code: "path_outside_root" });
    expect(await refusal(hostRoot, "/etc/passwd")).toMatchObject({ code: "path_outside_root" });
    expect(await refusal(hostRoot, "workspace/app")).toMatchObject({ code: "bad_request" });
  });

  it("works when hostRoot is itself reached through a symlink", async () => {
    const alias = join(base, "root-alias");
    expect(await resolveSandboxPath({ hostRoot: alias }, "/workspace/app/x", "path")).toBe(join(alias, "workspace/app/x"));
    expect(await refusal(alias, "/workspace/etc-link")).toMatchObject({ code: "path_outside_root" });
  });
});

describe("sandbox layout", () => {
  const built = [
    ...Object.values(SANDBOX_DIRS),
    stagingPath("r1", "tar.zst"),
    deltaListPath("s1"),
    imagePath("r1", "sqsh"),
    mountPath("r1"),
    ...Object.values(overlayLayer("r1")),
    datasetMarkerPath("node-modules"),
  ];

  it.each(built)("%s is a normal sandbox path under /snapflow", (path) => {
    expect(normalizeSandboxPath(path)).toEqual({ ok: true, path });
    expect(path.startsWith("/snapflow/")).toBe(true);
  });

  it("builds the paths the Worker and the agent already use", () => {
    expect(stagingPath("r1", "tar.zst")).toBe("/snapflow/staging/r1.tar.zst");
    expect(deltaListPath("s1")).toBe("/snapflow/staging/s1.delta-list");
    expect(imagePath("r1", "sqsh")).toBe("/snapflow/images/r1.sqsh");
    expect(mountPath("r1")).toBe("/snapflow/mnt/r1");
    expect(overlayLayer("r1")).toEqual({ layer: "/snapflow/overlays/r1", upper: "/snapflow/overlays/r1/upper", work: "/snapflow/overlays/r1/work" });
    expect(datasetMarkerPath("n")).toBe("/snapflow/datasets/n.json");
  });
});
