// The phases of a run, in order, and the names of the Workflow steps that run them. Step names are stable: tests,
// `wrangler workflows instances describe` and per-step timings refer to them.
export const BACKUP_PHASES = ["probe", "archive", "transfer", "verify", "record"] as const;
export const RESTORE_PHASES = ["probe", "transfer", "materialize", "verify", "record"] as const;
export type BackupPhase = (typeof BACKUP_PHASES)[number];
export type RestorePhase = (typeof RESTORE_PHASES)[number];
/** cleanup runs after a failure, to remove what the failed run wrote */
export type PhaseName = BackupPhase | RestorePhase | "cleanup";
export const CLEANUP_STEP = "cleanup" satisfies PhaseName;

/** The step name of a phase: the phase itself, or "backup probe" etc. inside a benchmark cell that runs both. */
export const stepName = (phase: PhaseName, prefix?: "backup" | "restore" | "compaction") => (prefix ? `${prefix} ${phase}` : phase);
