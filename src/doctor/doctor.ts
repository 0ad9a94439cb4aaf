// snapflow doctor: does this deployment (a Cloudflare account, or the local stack) do what snapflow relies on?
// Run by the Worker with its own bindings, in a sandbox of its own, so that every check happens where the thing
// checked lives: the Worker signs and reads the store, the sandbox's agent PUTs to the URLs, the runs go through
// the Workflows. One list of {check, ok, detail, ifMissing} comes back; `npx snapflow doctor` prints it.
//
//   worker   configuration, secrets, KV, the object store, Workflow and Queue bindings   worker-checks.ts
//   sandbox  starts, the agent's release, tools and versions, kernel capabilities        sandbox-checks.ts
//   store    presigned PUTs bound to checksums, create-only, part checksums, composite  store-checks.ts
//   runs     a 10 MB backup and restore per default preset (and the SDK's, where it can) run-checks.ts
//   cleanup  every key under doctor/<id>/, the runs' snapshots and records, the sandbox: gone
//
// A check that cannot run because one it depends on failed says so and fails too; the cleanup always runs.
import type { Deps } from "../deps.ts";
import { newId } from "../ids.ts";
import { AgentClient } from "../sandbox/agent-client.ts";
import type { MultipartUpload } from "../store/object-store.ts";
import { allPassed, blocked, runCheck, type DoctorCheck } from "./doctor-check.ts";
import { cleanRuns, RUN_CHECKS, runChecks, type RunTrail } from "./run-checks.ts";
import { SANDBOX_CHECKS, sandboxChecks } from "./sandbox-checks.ts";
import { cleanStore, STORE_CHECKS, storeChecks } from "./store-checks.ts";
import { workerChecks } from "./worker-checks.ts";

export const CLEANUP_CHECK = "cleanup: nothing left in the store, KV or the sandbox";

export interface DoctorReport {
  id: string;
  /** every check snapflow relies on passed (a failed advisory check is a warning) */
  ok: boolean;
  checks: DoctorCheck[];
  /** what the run made (and removed): its sandbox, its store prefix, the runs' snapshots and restores */
  made: { sandboxId: string; prefix: string } & RunTrail;
  ms: number;
}

export async function runDoctor(env: Env, d: Deps): Promise<DoctorReport> {
  const started = performance.now();
  const id = newId("dr");
  const prefix = `doctor/${id}/`;
  const sandboxId = `doctor-${id}`;
  const agent = new AgentClient(d.transport, sandboxId);
  const uploads: MultipartUpload[] = [];
  const trail: RunTrail = { snapshots: [], restores: [] };
  const checks: DoctorCheck[] = [...(await workerChecks(env, d, prefix))];
  try {
    const sandbox = await sandboxChecks(agent);
    checks.push(...sandbox.checks);
    if (sandbox.probe) {
      checks.push(...(await storeChecks({ d, agent, prefix, dir: `/tmp/snapflow-doctor-${id}` }, uploads)));
      checks.push(...(await runChecks(env, d, sandboxId, sandbox.probe, trail)));
    } else {
      for (const name of [...Object.values(STORE_CHECKS), ...Object.values(RUN_CHECKS)]) checks.push(blocked(name, "see the check's own name", SANDBOX_CHECKS.starts));
    }
  } finally {
    checks.push(await runCheck(CLEANUP_CHECK, "a doctor run leaves objects under doctor/ or a sandbox behind: remove them by hand (the cron's lifecycle sweep does not know them)", async () => {
      const left = [...(await cleanStore(d, prefix, uploads)), ...(await cleanRuns(d, trail, sandboxId))];
      // Ending the sandbox takes its files with it (production: the container; local: its root directory).
      await d.transport.destroy(sandboxId);
      return left.length ? { ok: false, detail: `left behind: ${left.join(", ")}` } : { ok: true, detail: `removed ${prefix}, ${trail.snapshots.length} snapshot(s), ${trail.restores.length} restore record(s), their run progress, and sandbox ${sandboxId}` };
    }));
  }
  return { id, ok: allPassed(checks), checks, made: { sandboxId, prefix, ...trail }, ms: Math.round(performance.now() - started) };
}
