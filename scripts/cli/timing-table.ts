// Renders per-step timings as a fixed-width table for terminals and Markdown alike.
export interface Row {
  run: string;
  step: string;
  ms: number;
  bytes: number;
  note?: string;
}

const mb = (bytes: number) => (bytes / 1e6).toFixed(1);
const rate = (bytes: number, ms: number) => (bytes > 0 && ms > 0 ? (bytes / 1e6 / (ms / 1000)).toFixed(1) : "");

export function timingTable(rows: Row[]): string {
  const header = ["run", "step", "ms", "MB", "MB/s", "note"];
  const body = rows.map((r) => [r.run, r.step, String(r.ms), r.bytes ? mb(r.bytes) : "", rate(r.bytes, r.ms), r.note ?? ""]);
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((b) => b[i]!.length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => (i >= 2 && i <= 4 ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join(" | ")} |`;
  return [line(header), `|${widths.map((w, i) => (i >= 2 && i <= 4 ? "-".repeat(w + 1) + ":" : "-".repeat(w + 2))).join("|")}|`, ...body.map(line)].join("\n");
}
