// Reading a body a sandbox chose the size of, never past a bound: the agent reads a stored manifest with it, the
// Worker a walk's manifest (manifest-limits.ts has the bounds). Web streams only, so both sides can use it. A stated
// length over the bound refuses the body before a byte is read; a streamed one is cut off once it passes.

export type BoundedBody = { bytes: Uint8Array } | { over: number; stated: boolean };

export async function readBodyBounded(r: Response, limit: number): Promise<BoundedBody> {
  const stated = Number(r.headers.get("content-length"));
  if (stated > limit) {
    await r.body?.cancel().catch(() => {});
    return { over: stated, stated: true };
  }
  const parts: Uint8Array[] = [];
  let total = 0;
  const reader = r.body?.getReader();
  for (let next = await reader?.read(); next && !next.done; next = await reader!.read()) {
    total += next.value.byteLength;
    if (total > limit) {
      await reader!.cancel().catch(() => {});
      return { over: total, stated: false };
    }
    parts.push(next.value);
  }
  const bytes = new Uint8Array(total);
  let at = 0;
  for (const part of parts) {
    bytes.set(part, at);
    at += part.byteLength;
  }
  return { bytes };
}
