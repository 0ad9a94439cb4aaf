// What every step returns: small JSON with its own measured time and bytes. In a module of its own (no imports)
// so that pure code the Node side shares (summaries, charts) can name it without pulling in Worker bindings.
export interface StepResult {
  ms: number;
  bytes: number;
  [detail: string]: unknown;
}
