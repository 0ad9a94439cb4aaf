// The engine's controls the watchdog uses on an instance a restart left behind. Seen on local Workflows (wrangler
// dev, scripts/experiments/): an instance cut off mid-step stays "running" for ever; pause() then resume() starts
// it again at the step it was in, the steps before it keeping their results; restart() replays every step from the
// first; terminate() ends it at once, without the run's failure path (so without its cleanup).
// But pause() on a LIVE instance (its step really executing) is not harmless locally: under wrangler dev the run
// went waitingForPause, paused, and after resume() ended errored ("archive … is not in the store after transfer");
// in the vitest workers pool the step was aborted ("Aborting engine: User called pause") and the instance stayed
// "queued" for good (scripts/experiments/pause-live-run.ts). So the watchdog pauses only what cannot be executing:
// an instance the stack's restart cut off, or one with no step ended for longer than every step's timeouts allow.
import { errorMessage } from "../errors.ts";

/** How long to wait for a paused instance to say "paused" before resuming it (the rest is left to the next pass). */
const PAUSE_WAIT_MS = 10_000;

export class StillPausing extends Error {}

/** pause(), wait until it is paused, resume(). Resuming an interrupted instance re-runs its step in flight. */
export async function pauseThenResume(instance: WorkflowInstance, beforePause: () => Promise<void>, alreadyPaused: boolean): Promise<void> {
  if (!alreadyPaused) {
    await beforePause();
    await instance.pause();
    const deadline = Date.now() + PAUSE_WAIT_MS;
    for (;;) {
      const s = (await instance.status()).status;
      if (s === "paused") break;
      // A step that is really running finishes first (waitingForPause): the next pass resumes it.
      if (Date.now() > deadline) throw new StillPausing();
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  await instance.resume();
}

/** terminate(), then a moment for the engine to say so: the cleanup that follows must not race the run's own step. */
export async function terminateQuietly(instance: WorkflowInstance): Promise<void> {
  await instance.terminate().catch((e) => console.warn(`watchdog: terminate ${instance.id}: ${errorMessage(e)}`));
  for (const deadline = Date.now() + 5000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 100))) {
    if (["terminated", "errored", "complete"].includes((await instance.status()).status)) return;
  }
}

