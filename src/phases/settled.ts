// Checks a phase asks at once (Promise.allSettled) and answers in a fixed order: the first failing check, in the
// order the caller lists them, is the error — not whichever failed first in time.

/** A settled promise's value, or its reason thrown. */
export function settled<T>(r: PromiseSettledResult<T>): T {
  if (r.status === "rejected") throw r.reason;
  return r.value;
}
