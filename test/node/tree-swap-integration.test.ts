// The swap a restore ends with (container/extract/tree-swap.ts), on a real filesystem: every step repeatable, and from
// every state a crash can leave on disk — including between its two renames — both ways out (swap in again, or roll
// back) end in one of two trees: the new one in place, or the old one exactly as it was.
import { createHash } from "node:crypto";
import { mkdir, mkdtemp, readdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { commitSwap, planSwap, readJournal, rollbackSwap, swapIn, type SwapSite } from "../../container/extract/tree-swap.ts";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "tree-swap-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** A site as the agent's route builds it, over a temporary directory (no mounts here). */
function site(): SwapSite {
  const host = { target: join(dir, "ws/app"), staged: join(dir, "ws/.snapflow-new-r1"), old: join(dir, "ws/.snapflow-old-r1"), journal: join(dir, "swaps/r1.json") };
  return {
    id: "r1", target: "/workspace/app", staged: "/workspace/.snapflow-new-r1", old: "/workspace/.snapflow-old-r1", host,
    refuseIfMounted: async () => {},
    targetMount: async () => "none",
    unmountTarget: async () => [],
  };
}

async function tree(root: string, files: Record<string, string>): Promise<void> {
  for (const [name, text] of Object.entries(files)) {
    await mkdir(join(root, name, ".."), { recursive: true });
    await writeFile(join(root, name), text);
  }
}

/** Every file under root with the SHA-256 of its bytes; null when root does not exist. */
async function digest(root: string): Promise<Record<string, string> | null> {
  const names = await readdir(root, { recursive: true, withFileTypes: true }).catch(() => null);
  if (!names) return null;
  const out: Record<string, string> = {};
  for (const e of names.filter((n) => n.isFile())) {
    const p = join(e.parentPath, e.name);
    out[p.slice(root.length + 1)] = createHash("sha256").update(await readFile(p)).digest("hex");
  }
  return out;
}

const OLD = { "a.txt": "the user's tree", "sub/b.txt": "kept until recorded" };
const NEW = { "a.txt": "the snapshot", "c/d.txt": "restored" };
const left = async () => (await readdir(join(dir, "ws"))).filter((n) => n.startsWith(".snapflow-")).concat(await readdir(join(dir, "swaps")).catch(() => []));

describe("swap over an existing tree", () => {
  it("plan → build → swap in → commit: the new tree in place, the old one gone; every step repeatable", async () => {
    const s = site();
    await tree(s.host.target, OLD);
    expect((await planSwap(s)).state).toBe("staging");
    expect((await planSwap(s)).state).toBe("staging");
    await tree(s.host.staged, NEW);
    expect(await digest(s.host.target)).toEqual(await digestOf(OLD));
    expect(await swapIn(s)).toMatchObject({ swapped: true, hadTarget: true });
    expect(await swapIn(s)).toMatchObject({ swapped: true, hadTarget: true });
    expect(await digest(s.host.target)).toEqual(await digestOf(NEW));
    expect(await digest(s.host.old)).toEqual(await digestOf(OLD));
    expect(await commitSwap(s)).toEqual({ committed: true, removedOld: true });
    expect(await commitSwap(s)).toEqual({ committed: false, removedOld: false });
    expect(await digest(s.host.target)).toEqual(await digestOf(NEW));
    expect(await left()).toEqual([]);
  });

  it("rolled back after the swap: the old tree exactly as it was, nothing of ours left", async () => {
    const s = site();
    await tree(s.host.target, OLD);
    await planSwap(s);
    await tree(s.host.staged, NEW);
    await swapIn(s);
    expect(await rollbackSwap(s)).toEqual({ rolledBack: "swapped", restoredOld: true });
    expect(await rollbackSwap(s)).toEqual({ rolledBack: "none", restoredOld: false });
    expect(await digest(s.host.target)).toEqual(await digestOf(OLD));
    expect(await left()).toEqual([]);
  });

  it("a crash between the two renames (old moved aside, new not yet in): rollback puts the old back; swapping in again finishes", async () => {
    for (const way of ["rollback", "swap in"] as const) {
      const s = site();
      await rm(join(dir, "ws"), { recursive: true, force: true });
      await tree(s.host.target, OLD);
      await planSwap(s);
      await tree(s.host.staged, NEW);
      // The disk as a SIGKILL right after swapIn's first rename leaves it: journal "swapping", target gone.
      const j = (await readJournal(s.host.journal))!;
      await writeFile(s.host.journal, JSON.stringify({ ...j, state: "swapping", hadTarget: true }));
      await rename(s.host.target, s.host.old);
      if (way === "rollback") {
        await rollbackSwap(s);
        expect(await digest(s.host.target)).toEqual(await digestOf(OLD));
      } else {
        await swapIn(s);
        await commitSwap(s);
        expect(await digest(s.host.target)).toEqual(await digestOf(NEW));
      }
      expect(await left()).toEqual([]);
    }
  });

  it("a failure before the swap (journal still 'staging'): the target was never touched; rollback removes the staged tree", async () => {
    const s = site();
    await tree(s.host.target, OLD);
    await planSwap(s);
    await tree(s.host.staged, { "half.txt": "half-extracted" });
    expect(await rollbackSwap(s)).toEqual({ rolledBack: "staging", restoredOld: false });
    expect(await digest(s.host.target)).toEqual(await digestOf(OLD));
    expect(await left()).toEqual([]);
  });

  it("a commit before the swap is refused: the old tree is still the target", async () => {
    const s = site();
    await tree(s.host.target, OLD);
    await planSwap(s);
    await expect(commitSwap(s)).rejects.toThrow(/only a tree swapped in can be committed/);
    expect(await digest(s.host.target)).toEqual(await digestOf(OLD));
  });
});

describe("swap into a target that did not exist", () => {
  it("rolled back after the swap: the target does not exist again", async () => {
    const s = site();
    await planSwap(s);
    await tree(s.host.staged, NEW);
    expect(await swapIn(s)).toMatchObject({ hadTarget: false });
    expect(await digest(s.host.target)).toEqual(await digestOf(NEW));
    await rollbackSwap(s);
    expect(await digest(s.host.target)).toBeNull();
    expect(await left()).toEqual([]);
  });

  it("swap in with nothing built is refused, naming the place", async () => {
    const s = site();
    await planSwap(s);
    await expect(swapIn(s)).rejects.toThrow(/nothing was built at \/workspace\/.snapflow-new-r1/);
  });
});

async function digestOf(files: Record<string, string>): Promise<Record<string, string>> {
  return Object.fromEntries(Object.entries(files).map(([k, v]) => [k, createHash("sha256").update(v).digest("hex")]));
}
