// store/block-reader.ts in workerd: blocks of exactly the size asked for but the last, the same bytes in the same
// order, from a byte stream (BYOB, as a fetch body is read) and from a JS stream (coalesced); a source's error
// reaches the reader and a reader's cancel reaches the source. And the relays that use it: the deadline wrapper
// hands both bodies on in blocks, and the multipart upload reads its body in blocks.
import { describe, expect, it } from "vitest";
import { blockReader, RELAY_BLOCK_BYTES } from "../../src/store/block-reader.ts";
import { fetchWithDeadline } from "../../src/sandbox/deadline-fetch.ts";
import { hashStream } from "../../src/store/hash-stream.ts";

const KiB = 1024;

/** `n` bytes whose value depends on their position, so that a reordering or a lost byte shows. */
function pattern(n: number): Uint8Array {
  const b = new Uint8Array(n);
  for (let i = 0; i < n; i++) b[i] = (i * 31 + (i >> 11)) & 0xff;
  return b;
}

/** A JS (non-byte) stream handing over `bytes` in chunks of the given sizes, cycled. */
function jsStream(bytes: Uint8Array, sizes: number[]): ReadableStream<Uint8Array> {
  let at = 0;
  let i = 0;
  return new ReadableStream<Uint8Array>({
    pull(c) {
      if (at >= bytes.length) return c.close();
      const n = sizes[i++ % sizes.length]!;
      c.enqueue(bytes.slice(at, at + n));
      at += n;
    },
  }, { highWaterMark: 0 });
}

/** A native byte stream written in chunks of `chunk` bytes, as the network delivers a fetch body. */
function byteStream(bytes: Uint8Array, chunk: number): ReadableStream<Uint8Array> {
  const { readable, writable } = new IdentityTransformStream();
  void (async () => {
    const w = writable.getWriter();
    for (let at = 0; at < bytes.length; at += chunk) await w.write(bytes.slice(at, at + chunk));
    await w.close();
  })().catch(() => {});
  return readable as ReadableStream<Uint8Array>;
}

/** The first index where they differ, or -1 (vitest's deep equality is slow on megabytes). */
function firstDifference(a: Uint8Array, b: Uint8Array): number {
  for (let i = 0; i < Math.max(a.length, b.length); i++) if (a[i] !== b[i]) return i;
  return -1;
}

async function readAll(stream: ReadableStream<Uint8Array>, blockBytes: number): Promise<{ sizes: number[]; bytes: Uint8Array; mode: string }> {
  const reader = blockReader(stream, blockBytes);
  const blocks: Uint8Array[] = [];
  for (;;) {
    const r = await reader.read();
    if (r.done) break;
    blocks.push(r.value);
  }
  expect(reader.blocks).toBe(blocks.length);
  // After the end, still the end.
  expect((await reader.read()).done).toBe(true);
  const out = new Uint8Array(blocks.reduce((n, b) => n + b.byteLength, 0));
  let at = 0;
  for (const b of blocks) {
    out.set(b, at);
    at += b.byteLength;
  }
  return { sizes: blocks.map((b) => b.byteLength), bytes: out, mode: reader.mode };
}

const expectedSizes = (total: number, block: number) => [...Array(Math.floor(total / block)).fill(block), ...(total % block ? [total % block] : [])];

describe("blockReader: blocks of the size asked for, the last one short", () => {
  const sources = {
    "a native byte stream in 4 KiB writes (BYOB)": (b: Uint8Array) => byteStream(b, 4 * KiB),
    "a native byte stream in writes larger than a block (BYOB)": (b: Uint8Array) => byteStream(b, 100 * KiB + 3),
    "a fetch body (BYOB)": (b: Uint8Array) => new Response(b).body!,
    "a JS stream of small uneven chunks (coalesced)": (b: Uint8Array) => jsStream(b, [4096, 1, 70_000, 333, 12_288]),
    "a JS stream of chunks larger than a block (coalesced, views)": (b: Uint8Array) => jsStream(b, [150 * KiB + 7, 64 * KiB]),
  };
  for (const [name, make] of Object.entries(sources)) {
    it(name, async () => {
      const block = 64 * KiB;
      for (const total of [1_000_003, 4 * block, 100, 0]) {
        const src = pattern(total);
        const { sizes, bytes, mode } = await readAll(make(src), block);
        expect(mode).toBe(name.includes("BYOB") ? "byob" : "coalesced");
        expect(sizes, `${total} bytes`).toEqual(expectedSizes(total, block));
        expect(firstDifference(bytes, src), `${total} bytes`).toBe(-1);
      }
    });
  }

  it("reads 256 KiB blocks unless told otherwise", async () => {
    const { sizes } = await readAll(byteStream(pattern(RELAY_BLOCK_BYTES + 5), 4 * KiB), RELAY_BLOCK_BYTES);
    expect(sizes).toEqual([262_144, 5]);
    const r = blockReader(new Response(pattern(600 * KiB)).body!);
    expect((await r.read()).value!.byteLength).toBe(256 * KiB);
  });

  it("refuses a block size that is not a positive integer", () => {
    expect(() => blockReader(new Response("x").body!, 0)).toThrow(RangeError);
  });
});

describe("blockReader: errors and cancellation", () => {
  it("a JS source's error rejects the read, after the blocks before it", async () => {
    let n = 0;
    const boom = new Error("source broke");
    const src = new ReadableStream<Uint8Array>({
      pull(c) {
        if (n++ < 20) c.enqueue(new Uint8Array(4 * KiB));
        else c.error(boom);
      },
    }, { highWaterMark: 0 });
    const r = blockReader(src, 32 * KiB);
    expect((await r.read()).value!.byteLength).toBe(32 * KiB);
    expect((await r.read()).value!.byteLength).toBe(32 * KiB);
    await expect(r.read()).rejects.toBe(boom);
  });

  it("a byte stream's error rejects the read", async () => {
    const { readable, writable } = new IdentityTransformStream();
    const w = writable.getWriter();
    void w.write(new Uint8Array(10 * KiB)).catch(() => {});
    const r = blockReader(readable as ReadableStream<Uint8Array>, 64 * KiB);
    const pending = r.read();
    await w.abort(new Error("connection cut")).catch(() => {});
    await expect(pending).rejects.toThrow();
  });

  it("cancel reaches a JS source with its reason", async () => {
    let cancelled: unknown;
    const src = new ReadableStream<Uint8Array>({
      pull(c) {
        c.enqueue(new Uint8Array(4 * KiB));
      },
      cancel(reason) {
        cancelled = reason;
      },
    }, { highWaterMark: 0 });
    const r = blockReader(src, 16 * KiB);
    await r.read();
    await r.cancel("enough");
    expect(cancelled).toBe("enough");
    expect((await r.read()).done).toBe(true);
  });

  it("cancel reaches a byte stream's writer", async () => {
    const { readable, writable } = new IdentityTransformStream();
    const w = writable.getWriter();
    void w.write(new Uint8Array(8 * KiB)).catch(() => {});
    const r = blockReader(readable as ReadableStream<Uint8Array>, 8 * KiB);
    expect((await r.read()).value!.byteLength).toBe(8 * KiB);
    await r.cancel(new Error("enough"));
    await expect(w.write(new Uint8Array(1))).rejects.toThrow();
  });
});

describe("the relays read in blocks", () => {
  const deadline = { totalMs: 30_000, idleMs: 10_000, totalVar: "TEST" };
  const failures = { timeout: () => new Error("timeout"), broken: (_: string, e: unknown) => e as Error };

  it("the deadline wrapper hands a 4 KiB-chunked request body and an unsized answer on in 256 KiB blocks", async () => {
    const total = 3_000_000;
    const src = pattern(total);
    let requestChunks = 0;
    const r = await fetchWithDeadline(async (init) => {
      // the agent's side: reads the request body, answers an unsized stream in 4 KiB chunks
      const got: Uint8Array[] = [];
      for await (const c of init.body as ReadableStream<Uint8Array>) {
        requestChunks++;
        got.push(c);
      }
      expect(got.reduce((n, c) => n + c.byteLength, 0)).toBe(total);
      return new Response(jsStream(src, [4 * KiB]));
    }, { method: "PUT", body: jsStream(src, [4 * KiB]) }, deadline, failures);
    let answerChunks = 0;
    let bytes = 0;
    for await (const c of r.body!) {
      answerChunks++;
      bytes += c.byteLength;
    }
    expect(bytes).toBe(total);
    // 3 MB in 4 KiB chunks is 733 chunks; in 256 KiB blocks, 12.
    expect(requestChunks).toBe(Math.ceil(total / RELAY_BLOCK_BYTES));
    expect(answerChunks).toBe(Math.ceil(total / RELAY_BLOCK_BYTES));
  });
});

describe("hashStream reads in blocks", () => {
  const hex = (b: ArrayBuffer) => [...new Uint8Array(b)].map((x) => x.toString(16).padStart(2, "0")).join("");

  it("the same SHA-256 and size as a one-shot digest, from a byte stream and a JS stream", async () => {
    const src = pattern(1_000_003);
    const want = { bytes: src.length, sha256: hex(await crypto.subtle.digest("SHA-256", src)) };
    expect(await hashStream(byteStream(src, 4 * KiB))).toEqual(want);
    expect(await hashStream(jsStream(src, [4096, 1, 70_000]))).toEqual(want);
    expect(await hashStream(new Response(new Uint8Array(0)).body!)).toEqual({ bytes: 0, sha256: hex(await crypto.subtle.digest("SHA-256", new Uint8Array(0))) });
  });

  it("a source's error rejects it", async () => {
    const boom = new Error("source broke");
    let n = 0;
    const src = new ReadableStream<Uint8Array>({
      pull(c) {
        if (n++ < 3) c.enqueue(new Uint8Array(4 * KiB));
        else c.error(boom);
      },
    });
    await expect(hashStream(src)).rejects.toBe(boom);
  });
});
