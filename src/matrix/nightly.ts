// The cron trigger's job: start the preset matrix named by NIGHTLY_MATRIX, with an id derived from the day (so a
// re-fired trigger restarts nothing new), and point nightly:latest at it.
import { depsFrom } from "../deps.ts";
import { KV_KEYS } from "../kv-keys.ts";
import { writeAfterKvWindow } from "../kv-write-retry.ts";
import { MatrixSpec } from "./matrix-spec.ts";
import { MATRIX_PRESETS } from "./presets.ts";
import { startMatrix } from "./schedule.ts";
import { SnapflowError } from "../errors.ts";

export async function startNightly(env: Env, when: Date): Promise<string> {
  const name = env.NIGHTLY_MATRIX;
  const preset = MATRIX_PRESETS[name];
  if (!preset) throw new SnapflowError("config_error", `NIGHTLY_MATRIX names no preset: '${name}' (one of ${Object.keys(MATRIX_PRESETS).join(", ")})`);
  const spec = MatrixSpec.parse(preset);
  const id = `nightly-${name}-${when.toISOString().slice(0, 10).replaceAll("-", "")}`;
  const d = depsFrom(env);
  await startMatrix(d, env.MATRIX_QUEUE, id, spec, "cron");
  // A re-fired trigger writes the same id again within the second: wait out KV's window rather than fail the cron.
  await writeAfterKvWindow(() => d.kv.put(KV_KEYS.nightlyLatest, id));
  return id;
}
