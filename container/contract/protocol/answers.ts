// Shapes the agent answers with that several routes share.
// Part of the agent's protocol (../protocol.ts re-exports every part): both sides import it.

export interface WrittenBytes {
  bytes: number;
  sha256: string;
  ms: number;
  /** which code moved the bytes: the native engine (snapflow-lazy) or the agent's own; absent: the agent's own */
  engine?: "native" | "node";
}

// ---- Shapes the agent answers with (types only; the agent makes them, the Worker reads them). ----

export interface Difference {
  path: string;
  kind: "missing" | "extra" | "changed";
  fields?: { name: string; expected: unknown; actual: unknown }[];
}

export interface Comparison {
  equal: boolean;
  counts: { missing: number; extra: number; changed: number };
  /** the first differences, in path order */
  differences: Difference[];
}
