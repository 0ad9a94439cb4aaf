// One presigned GET to a file by the native engine (`snapflow-lazy get`): an image restore's transfer
// (presigned-file) without the object's bytes passing through Node. The engine hashes what it writes, resumes a
// broken body by Range, abandons a silent store, and renames the file into place only once whole (a failure leaves no
// part of it). Why: Node's fetch → hashing stream → file took ~0.45 s and 0.5 CPU-s of the agent's for the npm
// workspace's 121 MB object served locally, the engine ~0.2 s and 0.15 CPU-s (native/lazy/MEASUREMENTS.md "get").
// Without the binary, or one from before `get`, the agent's own download runs (presigned.ts downloadToFile).
import { z } from "zod";
import type { WrittenBytes } from "../contract/protocol.ts";
import { askEngine } from "../system/engine-answer.ts";
import { storeIdleMs } from "./stall-deadline.ts";

/**
 * Below this size the agent's own download is quicker: starting the engine costs ~10-15 ms, and Node's extra cost
 * per byte (~3 ms per MB more here) only outweighs that past a few MB. A lazy restore's chunk index (28 KB for the
 * npm workspace) took 17-19 ms through the engine against the ~5 ms it took through Node.
 */
export const ENGINE_GET_MIN_BYTES = 4 << 20;

/** The snapflow-lazy here has no `get` subcommand: the caller downloads through Node instead. */
export class EngineLacksGet extends Error {
  constructor() {
    super("snapflow-lazy here has no get subcommand");
  }
}

const count = z.number().int().nonnegative();
const GetResult = z.object({ bytes: count, sha256: z.string().regex(/^[0-9a-f]{64}$/), ms: count, attempts: count });

/** Downloads `url` to `output` (replacing it once whole); throws the engine's error, or EngineLacksGet. */
export async function getWithEngine(bin: string, url: string, output: string): Promise<WrittenBytes & { attempts: number; engine: "native" }> {
  const started = performance.now();
  const line = { url, idleSeconds: Math.max(1, Math.round(storeIdleMs() / 1000)), retries: 4 };
  const r = await askEngine([bin, "get", "--out", output, "--result-fd", "3"], line, { result: GetResult, lacking: () => new EngineLacksGet() });
  return { bytes: r.bytes, sha256: r.sha256, ms: Math.round(performance.now() - started), attempts: r.attempts, engine: "native" };
}
