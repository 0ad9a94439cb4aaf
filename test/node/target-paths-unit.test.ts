// Which paths are one target for the leases (src/snapshots/target-leases.ts): a path and anything below it.
import { describe, expect, it } from "vitest";
import { pathsNest } from "../../src/snapshots/target-leases.ts";

describe("pathsNest", () => {
  it("a path nests with itself, its ancestors and its descendants, either way round", () => {
    expect(pathsNest("/workspace/app", "/workspace/app")).toBe(true);
    expect(pathsNest("/workspace", "/workspace/app")).toBe(true);
    expect(pathsNest("/workspace/app/node_modules/x", "/workspace")).toBe(true);
    expect(pathsNest("/", "/home/u")).toBe(true);
  });
  it("a shared name prefix is not nesting (/workspace/app and /workspace/app2), nor are siblings", () => {
    expect(pathsNest("/workspace/app", "/workspace/app2")).toBe(false);
    expect(pathsNest("/workspace/app2", "/workspace/app")).toBe(false);
    expect(pathsNest("/workspace/a", "/workspace/b")).toBe(false);
    expect(pathsNest("/home", "/workspace")).toBe(false);
  });
});
