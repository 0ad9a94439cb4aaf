// The backup's phase sequence, written once: the BackupWorkflow and the benchmark cell both run it, each with its
// own PhaseRunner (step names, progress). A failure is left to the caller, which runs cleanupBackup.
import type { Deps } from "../deps.ts";
import type { PhaseRunner } from "../phases/phase-runner.ts";
import type { BackupStrategy } from "../strategies/registry.ts";
import type { BackupParams, TransferResult } from "./backup-params.ts";
import { archivePhase, probePhase, recordPhase, transferPhase, verifyPhase } from "./backup-phases.ts";

export async function runBackupPhases(run: PhaseRunner, d: Deps, p: BackupParams, s: BackupStrategy): Promise<TransferResult> {
  await run.run("probe", () => probePhase(d, p, s));
  const archived = await run.run("archive", () => archivePhase(d, p, s));
  const sent = await run.run("transfer", () => transferPhase(d, p, s, archived));
  await run.run("verify", () => verifyPhase(d, p, s, sent));
  await run.run("record", () => recordPhase(d, p, s, archived, sent, { ...run.steps }));
  return sent;
}
