// The Worker's settings, read once from env and validated, so that a misconfigured deployment fails with a
// message naming the variable instead of a TypeError deep in a step.
import { z } from "zod";

const Config = z.object({
  SANDBOX_TRANSPORT: z.enum(["sandbox", "local"]),
  OBJECT_STORE: z.enum(["r2", "s3"]),
  AGENT_PORT: z.coerce.number().int().positive(),
  AGENT_URL: z.string(),
  AGENT_TOKEN: z.string().min(1, "set the AGENT_TOKEN secret"),
  API_TOKEN: z.string().min(1, "set the API_TOKEN secret"),
  S3_ENDPOINT: z.string().url(),
  S3_BUCKET: z.string().min(1),
  S3_REGION: z.string().min(1),
  S3_ACCESS_KEY_ID: z.string().min(1, "set the S3_ACCESS_KEY_ID secret (an R2 API token's access key)"),
  S3_SECRET_ACCESS_KEY: z.string().min(1, "set the S3_SECRET_ACCESS_KEY secret"),
  PRESIGN_EXPIRY_SECONDS: z.coerce.number().int().min(60).max(7 * 24 * 3600),
}).refine((c) => c.SANDBOX_TRANSPORT !== "local" || /^https?:\/\//.test(c.AGENT_URL), {
  message: "AGENT_URL must be the host agent's http:// URL when SANDBOX_TRANSPORT=local",
  path: ["AGENT_URL"],
});
export type Config = z.infer<typeof Config>;

export class ConfigError extends Error {}

const cache = new WeakMap<object, Config>();

export function readConfig(env: Env): Config {
  const hit = cache.get(env);
  if (hit) return hit;
  const r = Config.safeParse(env);
  if (!r.success) {
    const i = r.error.issues[0]!;
    throw new ConfigError(`configuration: ${i.path.join(".")}: ${i.message}`);
  }
  cache.set(env, r.data);
  return r.data;
}
