// The Worker's settings, read once from env and validated, so that a misconfigured deployment fails with a
// message naming the variable instead of a TypeError deep in a step.
import { z } from "zod";
import { AgentDeadlineVars } from "./sandbox/agent-deadlines.ts";
import { DEFAULT_MAX_MANIFEST_BYTES, DEFAULT_MAX_MANIFEST_ENTRIES } from "../container/contract/manifest-limits.ts";
import { parseRoots, useSandboxRoots } from "../container/contract/sandbox-roots.ts";
import { weakSecretReason } from "../container/contract/secret-strength.ts";
import { SnapflowError } from "./errors.ts";

const strongSecret = (name: string) =>
  z.string({ error: `set the ${name} secret to at least 32 random characters (openssl rand -base64 32)` }).superRefine((value, ctx) => {
    const reason = weakSecretReason(name, value);
    if (reason) ctx.addIssue({ code: "custom", message: reason });
  });

const Config = z.object({
  SANDBOX_TRANSPORT: z.enum(["sandbox", "local"]),
  OBJECT_STORE: z.enum(["r2", "s3"]),
  AGENT_PORT: z.coerce.number().int().positive(),
  AGENT_URL: z.string(),
  // Both are bearer secrets that guard everything: a short or guessable one ("change-me") is refused when the
  // config is first read (container/contract/secret-strength.ts). Each sandbox's agent gets only HMAC(AGENT_SECRET, its
  // id) (container/contract/agent-token.ts), never the secret.
  AGENT_SECRET: strongSecret("AGENT_SECRET"),
  API_TOKEN: strongSecret("API_TOKEN"),
  S3_ENDPOINT: z.string().url(),
  S3_BUCKET: z.string().min(1),
  S3_REGION: z.string().min(1),
  S3_ACCESS_KEY_ID: z.string().min(1, "set the S3_ACCESS_KEY_ID secret (an R2 API token's access key)"),
  S3_SECRET_ACCESS_KEY: z.string().min(1, "set the S3_SECRET_ACCESS_KEY secret"),
  PRESIGN_EXPIRY_SECONDS: z.coerce.number().int().min(60).max(7 * 24 * 3600),
  // A lazy restore signs the URLs of the image's first chunks and of its tables (where the index names them, else its
  // last bytes) before the mount, the rest once the tree is usable (restore/materialize/lazy.ts). One head chunk
  // holds the superblock, all a mount reads there; more only compete with the tables' fetch while the kernel mounts
  // (scripts/experiments/lazy-mount-cold.ts: 38 ms with 16, 16 ms with 1). The tests shrink the tail to take that path.
  LAZY_HEAD_CHUNKS: z.coerce.number().int().min(1).default(1),
  LAZY_TAIL_BYTES: z.coerce.number().int().min(0).default(128 * 1024 * 1024),
  // The largest manifest a backup may record (container/contract/manifest-limits.ts: a sandbox chooses its manifest's size,
  // and every restore reads it). A backup over either is refused naming the tree, the figure and the variable.
  MAX_MANIFEST_BYTES: z.coerce.number().int().positive().default(DEFAULT_MAX_MANIFEST_BYTES),
  MAX_MANIFEST_ENTRIES: z.coerce.number().int().positive().default(DEFAULT_MAX_MANIFEST_ENTRIES),
  // How long the Worker waits for the agent (src/sandbox/agent-deadlines.ts has the defaults and what each bounds).
  ...AgentDeadlineVars.shape,
  /** comma-separated roots callers may name (container/contract/sandbox-roots.ts); absent or empty: the SDK's defaults */
  SANDBOX_ROOTS: z.string().optional().transform((text, ctx) => {
    const r = parseRoots(text);
    if (r.ok) return r.roots;
    ctx.addIssue({ code: "custom", message: r.reason });
    return z.NEVER;
  }),
}).refine((c) => c.SANDBOX_TRANSPORT !== "local" || /^https?:\/\//.test(c.AGENT_URL), {
  message: "AGENT_URL must be the host agent's http:// URL when SANDBOX_TRANSPORT=local",
  path: ["AGENT_URL"],
});
export type Config = z.infer<typeof Config>;

/** A misconfigured deployment: permanent, and the message names the variable. */
export class ConfigError extends SnapflowError {
  constructor(message: string) {
    super("config_error", message);
  }
}

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
  // Paths are validated against the configured roots from here on (the API's schemas, the protocol's).
  useSandboxRoots(r.data.SANDBOX_ROOTS);
  return r.data;
}
