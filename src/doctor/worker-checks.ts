// The Worker itself: its configuration and secrets (readConfig refused the request already if either were weak or
// missing: these lines say so for a doctor that did run), and each binding answering a round trip or, where a
// call would start work (Workflows, Queues), being there.
import { weakSecretReason } from "../../container/contract/secret-strength.ts";
import type { Deps } from "../deps.ts";
import { runCheck, type DoctorCheck } from "./doctor-check.ts";

export const WORKER_CHECKS = {
  config: "worker: configuration",
  secrets: "worker: secrets are set and strong",
  kv: "worker: KV (INDEX) answers",
  store: "worker: object store answers",
  workflows: "worker: Workflows bound",
  queues: "worker: Queues bound",
} as const;

export async function workerChecks(env: Env, d: Deps, prefix: string): Promise<DoctorCheck[]> {
  const c = d.config;
  return [
    await runCheck(WORKER_CHECKS.config, "the Worker refuses every request with config_error, naming the variable", async () => ({
      ok: true,
      detail: `SANDBOX_TRANSPORT=${c.SANDBOX_TRANSPORT}, OBJECT_STORE=${c.OBJECT_STORE}, S3 ${new URL(c.S3_ENDPOINT).host}/${c.S3_BUCKET} (${c.S3_REGION}), presigned URLs live ≤ ${c.PRESIGN_EXPIRY_SECONDS} s`,
    })),
    await runCheck(WORKER_CHECKS.secrets, "a weak or missing API_TOKEN or AGENT_SECRET: the Worker refuses every request (config_error) naming it; missing S3 keys: every presigned path fails", async () => {
      const weak = (["API_TOKEN", "AGENT_SECRET"] as const).map((n) => weakSecretReason(n, c[n])).filter(Boolean);
      const unset = (["S3_ACCESS_KEY_ID", "S3_SECRET_ACCESS_KEY"] as const).filter((n) => !c[n]);
      if (weak.length || unset.length) return { ok: false, detail: [...weak, ...unset.map((n) => `${n} is not set`)].join("; ") };
      // Lengths only: a secret's value never leaves the Worker.
      return { ok: true, detail: `API_TOKEN (${c.API_TOKEN.length} chars) and AGENT_SECRET (${c.AGENT_SECRET.length} chars) pass the strength rules; S3 keys set (the store checks below prove they sign)` };
    }),
    await runCheck(WORKER_CHECKS.kv, "no snapshot index or run progress: listings and run status fail", async () => {
      const key = `${prefix}kv`;
      await d.kv.put(key, "1", { expirationTtl: 60 });
      const got = await d.kv.get(key);
      await d.kv.delete(key);
      return got === "1" ? { ok: true, detail: "put, get and delete of one key" } : { ok: false, detail: `read back ${JSON.stringify(got)} after writing "1"` };
    }),
    await runCheck(WORKER_CHECKS.store, "nothing can be backed up or restored", async () => {
      const key = `${prefix}worker-store`;
      await d.store.put(key, "doctor");
      const got = await d.store.get(key);
      const text = got ? new TextDecoder().decode(await new Response(got.body).arrayBuffer()) : null;
      await d.store.delete(key);
      return text === "doctor" ? { ok: true, detail: `${d.store.kind}: put, get and delete of one key` } : { ok: false, detail: `read back ${JSON.stringify(text)} after writing "doctor"` };
    }),
    await runCheck(WORKER_CHECKS.workflows, "backups, restores or benchmark cells cannot start (POST /api/backups answers 500)", async () => {
      const missing = (["BACKUP_WORKFLOW", "RESTORE_WORKFLOW", "CELL_WORKFLOW"] as const).filter((n) => typeof (env[n] as { create?: unknown } | undefined)?.create !== "function");
      return missing.length ? { ok: false, detail: `not bound: ${missing.join(", ")}` } : { ok: true, detail: "BACKUP_WORKFLOW, RESTORE_WORKFLOW, CELL_WORKFLOW (the backup and restore below run through the first two)" };
    }),
    await runCheck(WORKER_CHECKS.queues, "benchmark matrices cannot be scheduled or their results recorded", async () => {
      const missing = (["MATRIX_QUEUE", "RESULTS_QUEUE"] as const).filter((n) => typeof (env[n] as { send?: unknown } | undefined)?.send !== "function");
      return missing.length ? { ok: false, detail: `not bound: ${missing.join(", ")}` } : { ok: true, detail: "MATRIX_QUEUE, RESULTS_QUEUE (not sent to: a message would start a matrix)" };
    }),
  ];
}
