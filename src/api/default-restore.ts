// Which restore the API runs when a request names none (POST /api/restores), and which strategies are the defaults
// (GET /api/strategies marks them, so that `snapflow strategies` shows the same choice the API makes).
import { DEFAULT_BACKUP, formatName, restoresForSnapshot, STRATEGIES, type BackupStrategy, type RestoreStrategy } from "../strategies/registry.ts";

/** The recommended path among the restores that fit: the sandbox fetches over a presigned URL, piped into the extractor. */
export function defaultRestore(fits: readonly RestoreStrategy[]): RestoreStrategy | undefined {
  return fits.find((s) => s.path === "presigned-pipe") ?? fits.find((s) => s.path === "push-pipe") ?? fits[0];
}

/** Each strategy's default mark: the default backup; for a restore, the snapshot formats it is the default for. */
export function defaultMarks(): Map<string, { default?: true; defaultFor?: string[] }> {
  const marks = new Map<string, { default?: true; defaultFor?: string[] }>([[DEFAULT_BACKUP, { default: true }]]);
  for (const b of STRATEGIES.filter((s): s is BackupStrategy => s.kind === "backup")) {
    const r = defaultRestore(restoresForSnapshot({ format: b.format, ...(b.delta ? { delta: { kind: b.delta } } : {}) }));
    if (!r) continue;
    const what = b.delta ? `${b.delta} deltas` : `${formatName(b.format)} snapshots`;
    const mark = marks.get(r.name) ?? {};
    marks.set(r.name, { ...mark, defaultFor: [...new Set([...(mark.defaultFor ?? []), what])] });
  }
  return marks;
}
