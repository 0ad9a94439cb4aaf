// One line of the doctor's checklist, and how a check is run: a function that says ok or not (and why), timed, whose
// throw is a failure naming the error, never the doctor's own failure. Every check says what snapflow does when the
// deployment lacks the behaviour (`ifMissing`), so a red line is also the consequence, not only the symptom.
import { redactUrls } from "../../container/contract/redact-url.ts";

export interface DoctorCheck {
  /** a stable name (the *_CHECKS constants): tests and scripts target it */
  check: string;
  ok: boolean;
  /** what was seen: figures, versions, the store's answer */
  detail: string;
  /** what snapflow does when this is missing or broken */
  ifMissing: string;
  /** what the operator can do about it, where that is known (the store's behaviours) */
  fix?: string;
  ms: number;
  /** not run here, and why (ok stays true: nothing was found broken) */
  skipped?: string;
  /**
   * A behaviour snapflow does not rely on, because it guards the same thing itself (the presigner never signs an
   * empty checksum): its failure is a warning, and the report stays ok.
   */
  advisory?: true;
}

export type Outcome = { ok: boolean; detail: string } | { skipped: string };

/** Runs one check: its outcome, timed; a throw is a failure whose detail is the error (URLs redacted). */
export async function runCheck(check: string, ifMissing: string, fn: () => Promise<Outcome>, options: { advisory?: boolean; fix?: string } = {}): Promise<DoctorCheck> {
  const t = performance.now();
  const ms = () => Math.round(performance.now() - t);
  const advisory = { ...(options.advisory ? { advisory: true as const } : {}), ...(options.fix ? { fix: options.fix } : {}) };
  try {
    const o = await fn();
    return "skipped" in o ? { check, ok: true, detail: "not run", ifMissing, ms: ms(), skipped: o.skipped, ...advisory } : { check, ...o, ifMissing, ms: ms(), ...advisory };
  } catch (e) {
    return { check, ok: false, detail: redactUrls(e instanceof Error ? e.message : String(e)), ifMissing, ms: ms(), ...advisory };
  }
}

/** The verdict: every check that snapflow relies on passed (advisory ones only warn). */
export const allPassed = (checks: DoctorCheck[]) => checks.every((c) => c.ok || c.advisory);

/** A check that could not run because an earlier one it depends on failed: a failure naming that one. */
export function blocked(check: string, ifMissing: string, by: string, fix?: string): DoctorCheck {
  return { check, ok: false, detail: `not run: ${by} failed`, ifMissing, ms: 0, ...(fix ? { fix } : {}) };
}
