// What the watchdog (interrupted-runs.ts) found and did about a run, kept in KV under interrupted:<id> so that the
// run's status (GET /api/backups/:id, /api/restores/:id) says it, after the run has ended too. The Workflow
// rewrites run:<id> after every step from its own memory, so this cannot live there. Read back through zod: the
// watchdog counts earlier interruptions from it to bound how often one run is resumed.
import { z } from "zod";
import { KV_KEYS } from "../kv-keys.ts";

export const Interruption = z.object({
  /** when the watchdog found it */
  at: z.string(),
  /** what it found: "the stack restarted at …", "no progress for …" */
  cause: z.string(),
  /**
   * pausing: asked the Workflow to pause (it was mid-step), resume follows; resumed: it runs again from its last
   * completed step; failed: it could not continue, cleanup done, ended errored; released: it had ended, its lease
   * was left behind and is gone now
   */
  action: z.enum(["pausing", "resumed", "failed", "released"]),
  /** the step it resumes at (the first one not completed), or why it failed */
  detail: z.string().optional(),
});
export type Interruption = z.infer<typeof Interruption>;

const Interruptions = z.array(Interruption);

export async function readInterruptions(kv: KVNamespace, runId: string): Promise<Interruption[]> {
  const raw = await kv.get(KV_KEYS.interrupted(runId), "json").catch(() => null);
  const parsed = Interruptions.safeParse(raw ?? []);
  return parsed.success ? parsed.data : [];
}

/** Appends one; a refused write is logged (the watchdog's action stands; only the note is lost). */
export async function noteInterruption(kv: KVNamespace, runId: string, entry: Interruption): Promise<Interruption[]> {
  const all = [...(await readInterruptions(kv, runId)), entry];
  await kv.put(KV_KEYS.interrupted(runId), JSON.stringify(all), { expirationTtl: 30 * 86400 }).catch((e) => console.warn(`interruption note of ${runId} not written: ${e instanceof Error ? e.message : String(e)}`));
  return all;
}

/** One line for a status page: "interrupted (the stack restarted at …) at …; resumed at transfer". */
export function describeInterruption(i: Interruption): string {
  const what = { pausing: "pausing it to resume", resumed: "resumed", failed: "failed", released: "its lease released" }[i.action];
  return `interrupted (${i.cause}), found at ${i.at}; ${what}${i.detail ? `: ${i.detail}` : ""}`;
}
