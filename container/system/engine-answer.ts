// What the native engine (snapflow-lazy) answers on a descriptor of its own, read the same way by each of its callers
// (engine-pass.ts, engine-parts.ts, engine-unpack.ts, tree-size.ts): the whole text, then JSON that may not parse.

/** The stream's whole text. Awaited to its end, not to the process's exit: under Bun, fd 3's data can come later. */
export async function readAll(stream: NodeJS.ReadableStream): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

/** The parsed value, or undefined for text that is not JSON (the caller's schema then says what was wrong). */
export function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
