// Order statistics for the summaries. Pure.
export function median(values: number[]): number | undefined {
  if (!values.length) return undefined;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

export function stats(values: number[]): { n: number; median?: number; min?: number; max?: number } {
  return values.length ? { n: values.length, median: median(values), min: Math.min(...values), max: Math.max(...values) } : { n: 0 };
}
