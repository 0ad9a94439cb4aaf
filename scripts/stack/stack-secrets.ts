// What a stack must keep across its own restarts: the API token, the agent secret, the store's keys and the ports
// the Worker was told. A restarted stack (Ctrl-C and `npm run dev` again, or a crash) finds runs in flight whose
// Workflows resume against the same agent and store: new secrets would make the resumed steps' tokens and signed
// URLs useless, and a part restarted alone (the supervisor's agent or store) must come back where the running
// Worker's AGENT_URL / S3_ENDPOINT point. Kept beside the stack's state (mode 0600), checked with zod when read.
import { randomBytes } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";

const Secrets = z.object({
  // config.ts refuses secrets under 32 characters
  apiToken: z.string().min(32),
  agentSecret: z.string().min(32),
  s3AccessKeyId: z.string().min(8),
  s3SecretAccessKey: z.string().min(16),
  /** 0 until the first start picked one */
  agentPort: z.number().int().min(0).max(65535),
  s3Port: z.number().int().min(0).max(65535),
});
export type StackSecrets = z.infer<typeof Secrets>;

export const secretsFile = (dir: string) => join(dir, "stack-secrets.json");

/** The stack's secrets from `dir`, or new ones (not yet written: see saveSecrets). A damaged file is replaced, saying so. */
export function loadSecrets(dir: string, log: (line: string) => void): StackSecrets {
  const file = secretsFile(dir);
  if (existsSync(file)) {
    const parsed = Secrets.safeParse((() => { try { return JSON.parse(readFileSync(file, "utf8")); } catch { return null; } })());
    if (parsed.success) return parsed.data;
    log(`stack: ${file} is not a valid secrets file (${parsed.error.issues[0]?.message ?? "not JSON"}); making new secrets`);
  }
  return {
    apiToken: randomBytes(32).toString("base64url"),
    agentSecret: randomBytes(32).toString("base64url"),
    s3AccessKeyId: `AK${randomBytes(9).toString("hex").toUpperCase()}`,
    s3SecretAccessKey: randomBytes(24).toString("base64url"),
    agentPort: 0,
    s3Port: 0,
  };
}

export function saveSecrets(dir: string, secrets: StackSecrets): void {
  writeFileSync(secretsFile(dir), JSON.stringify(secrets, null, 1), { mode: 0o600 });
}
