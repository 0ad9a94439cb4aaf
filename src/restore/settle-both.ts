// Two independent calls run at once, for a step that must not fail while one of them is still running: its retry
// would race the call left in flight (a mount still being made while the retry clears the way).

/** Both results; when either fails, throws its error once the other has ended too. */
export async function settleBoth<A, B>(a: Promise<A>, b: Promise<B>): Promise<[A, B]> {
  const [x, y] = await Promise.allSettled([a, b]);
  if (x.status === "rejected") throw x.reason;
  if (y.status === "rejected") throw y.reason;
  return [x.value, y.value];
}
