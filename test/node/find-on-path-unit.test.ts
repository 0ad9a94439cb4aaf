// findOnPath answers as `command -v` does (container/system/find-on-path.ts): the first PATH directory, in PATH order,
// that holds an executable of that name, although every directory is asked at once. Real files in a temporary
// directory: one not executable is passed over, a later directory's copy loses to an earlier one's.
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { findOnPath } from "../../container/system/find-on-path.ts";

const root = mkdtempSync(join(tmpdir(), "find-on-path-"));
const dirs = ["a", "b", "c"].map((d) => join(root, d));
for (const d of dirs) mkdirSync(d);
const put = (dir: string, name: string, mode: number) => {
  writeFileSync(join(dir, name), "#!/bin/sh\n");
  chmodSync(join(dir, name), mode);
};
put(dirs[0]!, "tool", 0o644); // not executable: passed over
put(dirs[1]!, "tool", 0o755);
put(dirs[2]!, "tool", 0o755);
put(dirs[2]!, "last", 0o755);

describe("findOnPath", () => {
  const saved = process.env.PATH;
  afterAll(() => {
    process.env.PATH = saved;
    rmSync(root, { recursive: true, force: true });
  });
  it("answers the first executable in PATH order, skipping empty entries", async () => {
    process.env.PATH = ["", ...dirs].join(":");
    expect(await findOnPath("tool")).toBe(join(dirs[1]!, "tool"));
    expect(await findOnPath("last")).toBe(join(dirs[2]!, "last"));
    expect(await findOnPath("absent")).toBeNull();
    process.env.PATH = [dirs[2]!, dirs[1]!].join(":");
    expect(await findOnPath("tool")).toBe(join(dirs[2]!, "tool"));
  });
});
