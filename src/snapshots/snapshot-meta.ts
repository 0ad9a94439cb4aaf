// What a user may attach to a snapshot — a name, labels, a time to live — as zod schemas, bounded so that a
// snapshot's summary (with its labels) fits in KV's 1024-byte list metadata, which listing filters on.
import { z } from "zod";

/** A display name: free text on one line. */
export const SnapshotName = z.string().trim().min(1, "must not be empty").max(64, "at most 64 characters")
  .refine((s) => !/[\u0000-\u001f\u007f]/.test(s), "must not contain control characters");

const LABEL_KEY = /^[A-Za-z0-9][A-Za-z0-9._/-]{0,31}$/;
const LABEL_VALUE = /^[A-Za-z0-9._/:@+-]{0,48}$/;

/** key=value labels, as restic's tags or Kubernetes' labels: at most 8, keys ≤ 32 and values ≤ 48 of a small alphabet. */
export const Labels = z.record(
  z.string().regex(LABEL_KEY, "a label key is 1–32 of A-Z a-z 0-9 . _ / - (starting with a letter or digit)"),
  z.string().regex(LABEL_VALUE, "a label value is 0–48 of A-Z a-z 0-9 . _ / : @ + -"),
).refine((l) => Object.keys(l).length <= 8, "at most 8 labels");
export type Labels = z.infer<typeof Labels>;

const UNIT_SECONDS = { s: 1, m: 60, h: 3600, d: 86_400, w: 604_800 } as const;
const MAX_TTL = 10 * 365 * 86_400;

/** A duration: seconds as a number, or "90s", "30m", "12h", "3d", "2w". */
export const Duration = z.union([
  z.number().int().positive("a duration is positive"),
  z.string().regex(/^\d{1,9}[smhdw]$/, 'a duration is seconds, or a number with a unit s, m, h, d or w (e.g. "3d")')
    .transform((s) => Number(s.slice(0, -1)) * UNIT_SECONDS[s.at(-1) as keyof typeof UNIT_SECONDS]),
]).refine((n) => n > 0 && n <= MAX_TTL, "between 1 second and 10 years");

/** A label filter as the query string gives it: "key=value" (or "key" alone: the label is present). */
export function parseLabelFilter(text: string): { key: string; value?: string } | null {
  const eq = text.indexOf("=");
  const key = eq < 0 ? text : text.slice(0, eq);
  if (!LABEL_KEY.test(key)) return null;
  if (eq < 0) return { key };
  const value = text.slice(eq + 1);
  return LABEL_VALUE.test(value) ? { key, value } : null;
}
