// A restore never touches the tree at its target until the new tree is complete and verified. It is built beside
// the target (swapPlaces in sandbox-layout.ts: same filesystem), verified there, then swapped in by two renames:
// target → old, staged → target. The old tree is kept until the restore is recorded (commit removes it) or put
// back if the restore fails (rollback). A journal under /snapflow/swaps says how far a swap got, so every step can
// be repeated after a crash of the agent or the Worker and ends in one of two states: the target exactly as it
// was, or the new tree in place.
//
//   plan      journal "staging"      nothing at the target has been touched
//   swapIn    journal "swapping"     hadTarget recorded before the first rename; then the renames
//             journal "swapped"      the new tree is at the target, the old one at `old`
//   commit    journal "committed"    the restore is recorded: remove `old`, then the journal
//   rollback  (any state)            put `old` back (or remove what we put at a target that did not exist), remove
//                                    `staged`, then the journal
import { lstat, mkdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { dirname } from "node:path";
import { AgentError } from "../http/agent-error.ts";
import type { SwapJournal, SwapState } from "../contract/protocol.ts";

export type { SwapJournal, SwapState };

/** One restore's swap, as the route resolved it: sandbox paths for messages and the journal, host paths to act on. */
export interface SwapSite {
  id: string;
  target: string;
  staged: string;
  old: string;
  host: { target: string; staged: string; old: string; journal: string };
  /** throws (naming the field) when removing or renaming `hostPath` would go through or under a live mount */
  refuseIfMounted(hostPath: string, field: string): Promise<void>;
  /** is the target a mount point, and is it one of snapflow's (a mount restore's)? */
  targetMount(): Promise<"none" | "snapflow" | "foreign">;
  /** takes down snapflow's mount at the target; answers the sandbox paths unmounted */
  unmountTarget(): Promise<string[]>;
}

const exists = (p: string) => lstat(p).then(() => true, () => false);

export async function readJournal(file: string): Promise<SwapJournal | null> {
  const text = await readFile(file, "utf8").catch((e: NodeJS.ErrnoException) => {
    if (e.code === "ENOENT") return null;
    throw e;
  });
  return text === null ? null : (JSON.parse(text) as SwapJournal);
}

/** Written whole to a temporary name and renamed over the journal: a crash leaves the old or the new journal, never half of one. */
async function writeJournal(file: string, j: SwapJournal): Promise<void> {
  await mkdir(dirname(file), { recursive: true });
  const tmp = `${file}.tmp`;
  await writeFile(tmp, JSON.stringify({ ...j, updatedAt: new Date().toISOString() }));
  await rename(tmp, file);
}

/**
 * Starts (or, repeated, returns) a restore's swap: checks that the new tree can be renamed over the target (same
 * filesystem, the target not a mount point other than snapflow's own) and writes the journal. Touches nothing at
 * the target.
 */
export async function planSwap(site: SwapSite): Promise<SwapJournal> {
  const known = await readJournal(site.host.journal);
  if (known) return known;
  const mount = await site.targetMount();
  if (mount === "foreign") {
    throw new AgentError("bad_request", `path: ${site.target} is a mount point of its own filesystem; a restore swaps a new tree in by rename and cannot replace a mount point: restore into a directory below it`, "path");
  }
  await mkdir(dirname(site.host.staged), { recursive: true });
  await mkdir(dirname(site.host.target), { recursive: true });
  const [a, b] = await Promise.all([stat(dirname(site.host.staged)), stat(dirname(site.host.target))]);
  if (a.dev !== b.dev) {
    throw new AgentError("bad_request", `path: ${site.target} is on another filesystem than ${dirname(site.staged)}, where the restore builds the new tree; a swap by rename needs both on one filesystem`, "path");
  }
  const now = new Date().toISOString();
  const journal: SwapJournal = { id: site.id, target: site.target, staged: site.staged, old: site.old, state: "staging", startedAt: now, updatedAt: now };
  await writeJournal(site.host.journal, journal);
  return journal;
}

/** Puts the staged tree at the target and keeps the old one at `old`. Repeatable: it continues from the journal. */
export async function swapIn(site: SwapSite, o: { mountedAfter?: boolean } = {}): Promise<{ swapped: true; hadTarget: boolean; unmounted: string[]; ms: number }> {
  const started = performance.now();
  let j = await readJournal(site.host.journal);
  if (!j) throw new AgentError("not_found", `restore ${site.id} has no swap planned for ${site.target} (its probe plans one)`, "id");
  const { host } = site;
  if (j.state === "staging") {
    // A tree mounted at the target after the swap has nothing beside it: an empty directory goes in for the mount.
    if (o.mountedAfter) await mkdir(host.staged, { recursive: true });
    if (!(await exists(host.staged))) throw new AgentError("not_found", `restore ${site.id}: nothing was built at ${site.staged} to swap in`, "id");
    j = { ...j, state: "swapping", hadTarget: await exists(host.target) };
    await writeJournal(host.journal, j);
  }
  const unmounted = [...(j.unmounted ?? [])];
  if (j.state === "swapping") {
    if (j.hadTarget && (await exists(host.target)) && !(await exists(host.old))) {
      // The old tree was a snapflow mount (an earlier mount restore): the new tree is ready, so it may go now.
      if ((await site.targetMount()) === "snapflow") {
        unmounted.push(...(await site.unmountTarget()));
        j = { ...j, unmounted };
        await writeJournal(host.journal, j);
      }
      await rename(host.target, host.old);
    }
    if (await exists(host.staged)) {
      if (await exists(host.target)) throw new AgentError("tool_failed", `restore ${site.id}: something appeared at ${site.target} during the swap; the old tree is at ${site.old}`);
      await rename(host.staged, host.target);
    }
    j = { ...j, state: "swapped" };
    await writeJournal(host.journal, j);
  }
  if (j.state !== "swapped") throw new AgentError("bad_request", `restore ${site.id}'s swap is ${j.state}, it cannot swap in again`, "id");
  return { swapped: true, hadTarget: j.hadTarget ?? false, unmounted, ms: Math.round(performance.now() - started) };
}

/** The restore is recorded: the old tree goes. Repeatable; a swap that never went in is refused (its old tree is the target). */
export async function commitSwap(site: SwapSite): Promise<{ committed: boolean; removedOld: boolean }> {
  let j = await readJournal(site.host.journal);
  if (!j) return { committed: false, removedOld: false };
  if (j.state !== "swapped" && j.state !== "committed") throw new AgentError("bad_request", `restore ${site.id}'s swap is ${j.state}: only a tree swapped in can be committed`, "id");
  if (j.state === "swapped") {
    j = { ...j, state: "committed" };
    await writeJournal(site.host.journal, j);
  }
  const removedOld = await exists(site.host.old);
  if (removedOld) {
    await site.refuseIfMounted(site.host.old, "old");
    await rm(site.host.old, REMOVE_TREE);
  }
  await rm(site.host.journal, { force: true });
  return { committed: true, removedOld };
}

/**
 * Removing a tree of ours. A run the Worker abandoned (a terminated Workflow, a killed isolate) may still have its
 * extraction writing into the staged tree here: the agent does not stop work whose caller went away. rm then meets a
 * directory that fills again (ENOTEMPTY); Node's own retries (linear back-off) give that writer time to end.
 */
const REMOVE_TREE = { recursive: true, force: true, maxRetries: 8, retryDelay: 100 } as const;

/**
 * The restore failed (or was abandoned): the target goes back to exactly what it was, and nothing of ours is left.
 * Repeatable at any point, including after a crash half-way through itself. A committed swap is finished instead
 * (the restore was recorded: success is final).
 */
export async function rollbackSwap(site: SwapSite): Promise<{ rolledBack: SwapState | "none"; restoredOld: boolean }> {
  const j = await readJournal(site.host.journal);
  const { host } = site;
  if (j?.state === "committed") {
    await commitSwap(site);
    return { rolledBack: "committed", restoredOld: false };
  }
  let restoredOld = false;
  if (j && j.state !== "staging") {
    if (j.hadTarget) {
      if (await exists(host.old)) {
        // Whatever is at the target is ours (the new tree, or nothing yet): it makes way for the old one.
        if (await exists(host.target)) {
          await site.refuseIfMounted(host.target, "path");
          await rm(host.target, REMOVE_TREE);
        }
        await rename(host.old, host.target);
        restoredOld = true;
      }
    } else if (!(await exists(host.staged)) && (await exists(host.target))) {
      // There was nothing at the target and the staged tree went in: the target is ours to remove.
      await site.refuseIfMounted(host.target, "path");
      await rm(host.target, REMOVE_TREE);
    }
  }
  if (await exists(host.staged)) {
    await site.refuseIfMounted(host.staged, "staged");
    await rm(host.staged, REMOVE_TREE);
  }
  await rm(host.journal, { force: true });
  return { rolledBack: j?.state ?? "none", restoredOld };
}
