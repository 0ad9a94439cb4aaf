// Decodes the SDK file API's streamed encoding — server-sent events carrying base64 chunks — back into bytes.
// Used by the local transport for the sdk-base64 baseline; the cost it measures is the point.
import { SnapflowError } from "../errors.ts";
export function decodeBase64Events(body: ReadableStream<Uint8Array>): ReadableStream<Uint8Array> {
  let pending = "";
  const decoder = new TextDecoder();
  const events = (c: TransformStreamDefaultController<Uint8Array>, text: string) => {
    pending += text;
    let end: number;
    while ((end = pending.indexOf("\n\n")) >= 0) {
      const event = pending.slice(0, end);
      pending = pending.slice(end + 2);
      const data = event.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("");
      if (!data) continue;
      const m = JSON.parse(data) as { type: string; data?: string; error?: string };
      if (m.type === "chunk" && m.data) c.enqueue(base64ToBytes(m.data));
      else if (m.type === "error") throw new SnapflowError("agent_error", `file stream failed: ${m.error}`);
    }
  };
  return body.pipeThrough(new TransformStream<Uint8Array, Uint8Array>({
    transform: (chunk, c) => events(c, decoder.decode(chunk, { stream: true })),
    flush: (c) => events(c, decoder.decode() + "\n\n"),
  }));
}

export function base64ToBytes(b64: string): Uint8Array {
  const binary = atob(b64);
  const out = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i);
  return out;
}
