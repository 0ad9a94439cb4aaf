// Runs fn over items with at most `limit` calls in flight, answers in input order. The chunk paths make one store
// request per chunk (HEAD, presign, DELETE): in parallel, but bounded, so a 10k-chunk image neither serialises into
// minutes nor opens 10k connections at once.
export async function mapBounded<T, R>(items: readonly T[], limit: number, fn: (item: T, i: number) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!, i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}
