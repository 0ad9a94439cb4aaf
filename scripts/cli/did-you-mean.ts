// "Did you mean": the closest of a few known names to what was typed (commands, flags, strategies, presets), by
// edit distance (Levenshtein: insertions, deletions, substitutions), for one-line usage errors. Pure.

/** Edits that turn `a` into `b`. */
export function editDistance(a: string, b: string): number {
  let row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++) next[j] = Math.min(row[j]! + 1, next[j - 1]! + 1, row[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    row = next;
  }
  return row[b.length]!;
}

/**
 * The known name nearest to `typed`, when it is near enough to be a typo (at most a third of its length away, at
 * least 2 edits allowed) or when `typed` is the start of exactly one name; undefined otherwise.
 */
export function closest(typed: string, known: readonly string[]): string | undefined {
  const starts = known.filter((k) => typed.length >= 3 && k.startsWith(typed));
  if (starts.length === 1) return starts[0];
  let best: { name: string; d: number } | undefined;
  for (const k of known) {
    const d = editDistance(typed, k);
    if (!best || d < best.d) best = { name: k, d };
  }
  return best && best.d <= Math.max(2, Math.floor(typed.length / 3)) ? best.name : undefined;
}

/** "; did you mean X?" or "" (to end a message with). */
export const didYouMean = (typed: string, known: readonly string[]): string => {
  const c = closest(typed, known);
  return c ? `; did you mean ${c}?` : "";
};
