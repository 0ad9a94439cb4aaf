// The agent's sweeper: what runs that died (a killed agent, a stopped stack, a Workflow that never reached its
// cleanup) left in a sandbox, found by age. Swaps whose journal is older than the bound are rolled back (the target
// goes back to what it was; a committed one is finished), and staging files and downloaded images older than it
// are removed unless a live mount reads them; mounts that died with an earlier agent go at once (dead-mounts.ts). The bound is longer than any run's steps with their retries, so no
// running run owns what it removes. It runs when the agent starts, every hour after, and on request
// (POST /v1/sweep, with a bound of the caller's choosing).
import { readdir, rm, lstat } from "node:fs/promises";
import { join } from "node:path";
import { sweepDeadMounts } from "../mounts/dead-mounts.ts";
import { refuseIfMounted } from "../mounts/mount-guard.ts";
import type { AgentState } from "../routes/route.ts";
import { SANDBOX_DIRS } from "../contract/sandbox-layout.ts";
import { swapSite, type SandboxScope } from "../extract/swap-site.ts";
import { readJournal, rollbackSwap } from "../extract/tree-swap.ts";

/** Longer than any run: a restore's steps with all their retries take hours at most (workflows/step-config.ts). */
export const SWEEP_OLDER_THAN_MS = 12 * 3600_000;
export const SWEEP_EVERY_MS = 3600_000;

export interface SweepResult {
  /** restore ids whose swap was rolled back (or, committed, finished) */
  swaps: string[];
  /** sandbox paths removed from staging and images */
  removed: string[];
  /** what could not be swept, and why (a live mount, say) */
  kept: string[];
}

const host = (scope: SandboxScope, sandboxPath: string) => join(scope.root.hostRoot, sandboxPath);

async function entries(dir: string): Promise<string[]> {
  return readdir(dir).catch(() => []);
}

export async function sweepSandbox(scope: SandboxScope, olderThanMs: number, now = Date.now()): Promise<SweepResult> {
  const result: SweepResult = { swaps: [], removed: [], kept: [] };
  const swaps = host(scope, SANDBOX_DIRS.swaps);
  for (const name of await entries(swaps)) {
    if (!name.endsWith(".json")) continue;
    const journal = await readJournal(join(swaps, name)).catch(() => null);
    if (!journal || now - Date.parse(journal.updatedAt) < olderThanMs) continue;
    try {
      await rollbackSwap(await swapSite(scope, { target: journal.target, id: journal.id }));
      result.swaps.push(journal.id);
    } catch (e) {
      result.kept.push(`swap ${journal.id}: ${(e as Error).message}`);
    }
  }
  // A swap's trees under /snapflow/swaps (a root target's) go with its journal above; the rest are files by age.
  for (const dir of [SANDBOX_DIRS.staging, SANDBOX_DIRS.images]) {
    for (const name of await entries(host(scope, dir))) {
      const path = join(host(scope, dir), name);
      const st = await lstat(path).catch(() => null);
      if (!st || now - st.mtimeMs < olderThanMs) continue;
      try {
        await refuseIfMounted(path, "path", scope.root.hostRoot, scope.agent.mounts, scope.sandboxId);
        await rm(path, { recursive: true, force: true });
        result.removed.push(`${dir}/${name}`);
      } catch (e) {
        result.kept.push(`${dir}/${name}: ${(e as Error).message}`);
      }
    }
  }
  return result;
}

/** Every sandbox this agent serves: one root per sandbox id in host mode, "/" inside a sandbox. */
export async function sweepEverySandbox(agent: AgentState, olderThanMs: number): Promise<Record<string, SweepResult>> {
  const dir = agent.options.sandboxesDir;
  const scopes: SandboxScope[] = dir
    ? (await entries(dir)).map((id) => ({ root: { hostRoot: join(dir, id) }, sandboxId: id, agent }))
    : [{ root: { hostRoot: "/" }, sandboxId: "self", agent }];
  const out: Record<string, SweepResult> = {};
  const dead = await sweepDeadMounts([dir ?? "/"]).catch((e: Error) => [`failed: ${e.message}`]);
  if (dead.length) out["dead mounts"] = { swaps: [], removed: dead.map((m) => `mount ${m}`), kept: [] };
  for (const scope of scopes) {
    const r = await sweepSandbox(scope, olderThanMs).catch((e: Error) => ({ swaps: [], removed: [], kept: [`sweep failed: ${e.message}`] }));
    if (r.swaps.length || r.removed.length || r.kept.length) out[scope.sandboxId] = r;
  }
  return out;
}

/** At start and every `everyMs` after; never keeps the process alive on its own. Logs what it swept. */
export function startSweeper(agent: AgentState, options: { olderThanMs: number; everyMs: number }): () => void {
  const run = () => void sweepEverySandbox(agent, options.olderThanMs).then((swept) => {
    if (Object.keys(swept).length) console.log(JSON.stringify({ agent: "swept", olderThanMs: options.olderThanMs, swept }));
  });
  const first = setTimeout(run, 0);
  const timer = setInterval(run, options.everyMs);
  first.unref();
  timer.unref();
  return () => {
    clearTimeout(first);
    clearInterval(timer);
  };
}
