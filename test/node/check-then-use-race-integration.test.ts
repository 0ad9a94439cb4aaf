// Check-then-use: code running in the restore target swaps a directory the merge or the deletion walk has just
// checked for a symlink to outside, over and over, in another process, while the agent's real code runs. A walk by
// path names (lstat, then act on the name) sooner or later acts through the symlink: outside files are replaced
// (merge) or deleted (removal). The walk by directory descriptors (native/lazy/internal/beneath) never does.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { mergeInto } from "../../container/extract/safe-merge.ts";
import { removeEntriesSafely } from "../../container/extract/safe-remove.ts";

const FILES = 400;
const ROUNDS = 15;
const names = Array.from({ length: FILES }, (_, i) => `f${i}`);

// The swap, in a tight loop: `d` is a directory for 0.2 ms (so a check finds one), then a symlink to ../outside for
// 0.2 ms (so a use that follows the name lands outside). When the work put a new `d` in place meanwhile (a merge
// replacing what it found), the old one is dropped, so the swap goes on with the new one.
const SWAPPER = `
const fs = require("node:fs");
const [d, aside] = process.argv.slice(1);
const hold = () => { const t = process.hrtime.bigint(); while (process.hrtime.bigint() - t < 200000n); };
for (;;) {
  hold();
  try { fs.renameSync(d, aside); } catch { continue; }
  try { fs.symlinkSync("../outside", d); hold(); fs.unlinkSync(d); } catch {}
  try { fs.renameSync(aside, d); } catch { fs.rmSync(aside, { recursive: true, force: true }); }
}`;

let base: string;
let swapper: ChildProcess | undefined;

afterEach(async () => {
  if (swapper && swapper.exitCode === null) {
    swapper.kill("SIGKILL");
    await new Promise((r) => swapper!.once("exit", r));
  }
  swapper = undefined;
  rmSync(base, { recursive: true, force: true });
});

/** target/d (a real directory), outside/ holding a sentinel under every name the work will touch in d. */
function layout() {
  base = mkdtempSync(join(tmpdir(), "snapflow-race-"));
  const target = join(base, "target");
  const outside = join(base, "outside");
  mkdirSync(join(target, "d"), { recursive: true });
  mkdirSync(outside);
  for (const n of names) writeFileSync(join(outside, n), "sentinel");
  return { target, outside, modeOutside: statSync(outside).mode };
}

function startSwapping(target: string) {
  swapper = spawn(process.execPath, ["-e", SWAPPER, join(target, "d"), join(target, "d.aside")], { stdio: "ignore" });
}

function expectOutsideUntouched(outside: string, modeOutside: number) {
  const listed = readdirSync(outside).sort();
  expect(listed).toEqual([...names].sort());
  const changed = names.filter((n) => readFileSync(join(outside, n), "utf8") !== "sentinel");
  expect(changed).toEqual([]);
  expect(statSync(outside).mode).toBe(modeOutside);
}

describe("check-then-use: a directory swapped for a symlink to outside while the agent works in it", () => {
  it("the deletion walk never deletes through the symlink", async () => {
    const { target, outside, modeOutside } = layout();
    startSwapping(target);
    let removed = 0;
    for (let round = 0; round < ROUNDS; round++) {
      removed += (await removeEntriesSafely(target, names.map((n) => `d/${n}`)).catch(() => ({ removed: 0 }))).removed;
    }
    swapper!.kill("SIGKILL");
    expectOutsideUntouched(outside, modeOutside);
    expect(removed).toBeGreaterThan(0); // it did work in `d`, not only skip
  });

  it("the staging merge never moves a layer's files through the symlink", async () => {
    const { target, outside, modeOutside } = layout();
    startSwapping(target);
    let moved = 0;
    for (let round = 0; round < ROUNDS; round++) {
      // Beside the target (same filesystem, as the agent's staging): not in it, where the swapper holds its lock.
      const staging = join(base, `layer-${round}`);
      mkdirSync(join(staging, "d"), { recursive: true, mode: 0o700 });
      for (const n of names) writeFileSync(join(staging, "d", n), "from the layer");
      // A directory the archive holds (whole-second mtime, before the extraction): the merge sets its mode too.
      // A walk by names may also fail outright (ENOENT: `d` is away for a moment); only outside matters here.
      moved += await mergeInto(staging, target, Date.now() + 60_000).catch(() => 0);
      rmSync(staging, { recursive: true, force: true });
    }
    swapper!.kill("SIGKILL");
    expectOutsideUntouched(outside, modeOutside);
    expect(moved).toBeGreaterThan(0);
  });
});
