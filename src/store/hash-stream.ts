// SHA-256 and byte count of a stream, computed as it flows (crypto.DigestStream keeps nothing but the state).
const toHex = (b: ArrayBuffer) => [...new Uint8Array(b)].map((x) => x.toString(16).padStart(2, "0")).join("");

export async function hashStream(body: ReadableStream<Uint8Array>): Promise<{ bytes: number; sha256: string }> {
  const digest = new crypto.DigestStream("SHA-256");
  let bytes = 0;
  await body.pipeThrough(new TransformStream<Uint8Array, Uint8Array>({ transform(chunk, c) { bytes += chunk.byteLength; c.enqueue(chunk); } })).pipeTo(digest);
  return { bytes, sha256: toHex(await digest.digest) };
}

export { toHex };
