// SHA-256 and byte count of a stream, computed as it flows (crypto.DigestStream keeps nothing but the state). Read in
// 256 KiB blocks (block-reader.ts): a store's GET body arrives in ~4 KB chunks, and a JS hop per chunk (the
// TransformStream that counted them) was most of what hashing a read-back archive cost the Worker.
import { blockReader } from "./block-reader.ts";

const toHex = (b: ArrayBuffer) => [...new Uint8Array(b)].map((x) => x.toString(16).padStart(2, "0")).join("");

export async function hashStream(body: ReadableStream<Uint8Array>): Promise<{ bytes: number; sha256: string }> {
  const digest = new crypto.DigestStream("SHA-256");
  const writer = digest.getWriter();
  const reader = blockReader(body);
  let bytes = 0;
  try {
    for (;;) {
      const r = await reader.read();
      if (r.done) break;
      bytes += r.value.byteLength;
      await writer.write(r.value);
    }
    await writer.close();
  } catch (e) {
    // The aborted DigestStream rejects its digest promise too: marked handled, or it is an unhandled rejection.
    digest.digest.catch(() => {});
    await reader.cancel(e).catch(() => {});
    await writer.abort(e).catch(() => {});
    throw e;
  }
  return { bytes, sha256: toHex(await digest.digest) };
}

export { toHex };
