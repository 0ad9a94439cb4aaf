// Every key snapflow writes in KV (the INDEX namespace), in one place. KV holds the index and progress that lists
// and pages read quickly; the records themselves live in the object store (see snapshots/records.ts and
// matrix/matrix-records.ts for the store's keys).
//
//   snapshot:<id>      → SnapshotSummary, once the snapshot is verified and recorded ("good")
//   run:<id>           → RunProgress of a backup or restore, updated per step
//   interrupted:<id>   → RunInterruptions: what the watchdog found and did when a run was interrupted (runs/interruptions.ts)
//   matrix:<id>        → MatrixProgress
//   nightly:latest     → the id of the latest cron-started matrix
//   retention:latest   → what the last retention run kept (and why) and removed
//   queue-error:<msg>  → the last error of a queue message that is being retried (for the dead-letter record)
//   dead-letter:<msg>  → a dead message that names no matrix
export const KV_KEYS = {
  snapshot: (id: string) => `snapshot:${id}`,
  snapshotPrefix: "snapshot:",
  run: (id: string) => `run:${id}`,
  interrupted: (id: string) => `interrupted:${id}`,
  matrix: (id: string) => `matrix:${id}`,
  matrixPrefix: "matrix:",
  nightlyLatest: "nightly:latest",
  retentionLatest: "retention:latest",
  queueError: (messageId: string) => `queue-error:${messageId}`,
  deadLetter: (messageId: string) => `dead-letter:${messageId}`,
} as const;
