// Every key snapflow writes in KV (the INDEX namespace), in one place. KV holds the index and progress that lists
// and pages read quickly; the records themselves live in the object store (see snapshots/records.ts and
// matrix/matrix-records.ts for the store's keys).
//
//   snapshot:<id>      → SnapshotSummary, once the snapshot is verified and recorded ("good")
//   run:<id>           → RunProgress of a backup or restore, updated per step
//   matrix:<id>        → MatrixProgress: a cache of the store's (matrix/progress-cache.ts), read only for listing
//   nightly:latest     → the id of the latest cron-started matrix
//   retention:latest   → what the last retention run kept (and why) and removed
//   queue-error:<msg>  → the last error of a queue message that is being retried (for the dead-letter record)
//
// Dead letters live in the store (matrix/dead-letters.ts). Any write here may be refused (429: about one write per
// second per key): the snapshot index and matrix progress are rebuilt from the store, run progress and queue errors
// are best-effort.
export const KV_KEYS = {
  snapshot: (id: string) => `snapshot:${id}`,
  snapshotPrefix: "snapshot:",
  run: (id: string) => `run:${id}`,
  matrix: (id: string) => `matrix:${id}`,
  matrixPrefix: "matrix:",
  nightlyLatest: "nightly:latest",
  retentionLatest: "retention:latest",
  queueError: (messageId: string) => `queue-error:${messageId}`,
} as const;
