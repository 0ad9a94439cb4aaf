// Reads a stream in large blocks, so that what the Worker does per piece of a relayed archive (the deadline's timer,
// the time to first byte, the digest, the part cutter) runs once per block, not once per chunk the runtime hands
// over. A fetch body arrives in ~4 KB chunks: the npm workspace's 120 MB archive came as 29,497 of them, each through
// three JS hops, and workerd spent 2.7–2.9 CPU-s per default backup; read in 256 KiB blocks it came as 426 and
// workerd spent 0.9–1.2 CPU-s (emulator figures, prototype).
//
//   a byte stream (fetch and R2 bodies)  ──► BYOB readAtLeast(block): the runtime fills the block itself, one JS
//                                            read per block
//   any other stream (a JS stream)       ──► chunks copied into a block until it is full; a chunk that holds a whole
//                                            block is passed on as a view, without a copy
//
// Every block is exactly `blockBytes` long except the stream's last, which may be shorter (never empty). Memory is
// one block being filled (plus, when coalescing, the rest of the chunk that overflowed it). A source's error
// rejects the read; cancel() reaches the source.

/** 256 KiB: the prototype's block; 4 blocks fill the deadline wrapper's 1 MiB read-ahead. */
export const RELAY_BLOCK_BYTES = 256 * 1024;

export interface BlockReader {
  /** The next block: `blockBytes` long, or shorter only when it is the stream's last. */
  read(): Promise<ReadableStreamReadResult<Uint8Array>>;
  /** Cancels the source (and ends this reader). */
  cancel(reason?: unknown): Promise<void>;
  /** Blocks returned so far. */
  readonly blocks: number;
  /** how it reads: the runtime fills each block (a byte stream), or JS copies chunks into it */
  readonly mode: "byob" | "coalesced";
}

const DONE: ReadableStreamReadResult<Uint8Array> = { done: true, value: undefined };

export function blockReader(stream: ReadableStream<Uint8Array>, blockBytes = RELAY_BLOCK_BYTES): BlockReader {
  if (!Number.isSafeInteger(blockBytes) || blockBytes < 1) throw new RangeError(`block size ${blockBytes} is not a positive integer`);
  const byob = byobReaderOf(stream);
  const next = byob ? byobBlocks(byob, blockBytes) : coalescedBlocks(stream.getReader(), blockBytes);
  const reader = {
    blocks: 0,
    mode: byob ? "byob" as const : "coalesced" as const,
    async read() {
      const r = await next.read();
      if (!r.done) reader.blocks++;
      return r;
    },
    cancel: (reason?: unknown) => next.cancel(reason),
  };
  return reader;
}

/** A BYOB reader when the stream is a byte stream; getReader throws (leaving the stream unlocked) when it is not. */
function byobReaderOf(stream: ReadableStream<Uint8Array>): ReadableStreamBYOBReader | undefined {
  try {
    return stream.getReader({ mode: "byob" });
  } catch {
    return undefined;
  }
}

type Next = Pick<BlockReader, "read" | "cancel">;

function byobBlocks(reader: ReadableStreamBYOBReader, blockBytes: number): Next {
  // workerd's readAtLeast fills the view in the runtime; elsewhere, plain BYOB reads in a loop.
  const atLeast = typeof reader.readAtLeast === "function";
  let ended = false;
  return {
    async read() {
      if (ended) return DONE;
      // Each read transfers the buffer: the bytes so far live in the buffer of the view the last read returned.
      let buffer = new ArrayBuffer(blockBytes);
      let filled = 0;
      while (filled < blockBytes) {
        const view = new Uint8Array(buffer, filled);
        const r = atLeast ? await reader.readAtLeast(view.byteLength, view) : await reader.read(view);
        if (!r.value) {
          // Cancelled: no buffer comes back, and nothing is owed to anyone.
          ended = true;
          return DONE;
        }
        buffer = r.value.buffer as ArrayBuffer;
        if (r.done) {
          // The end gives the buffer back as an empty view at offset 0 (workerd), not at `filled`: count on our own.
          ended = true;
          break;
        }
        filled = r.value.byteOffset + r.value.byteLength;
      }
      return filled ? { done: false, value: new Uint8Array(buffer, 0, filled) } : DONE;
    },
    cancel(reason) {
      ended = true;
      return reader.cancel(reason);
    },
  };
}

function coalescedBlocks(reader: ReadableStreamDefaultReader<Uint8Array>, blockBytes: number): Next {
  let carry: Uint8Array | undefined;
  let ended = false;
  return {
    async read() {
      let block: Uint8Array | undefined;
      let filled = 0;
      for (;;) {
        let chunk = carry;
        carry = undefined;
        if (!chunk) {
          if (ended) break;
          const r = await reader.read();
          if (r.done) {
            ended = true;
            break;
          }
          chunk = r.value;
        }
        if (!block && chunk.byteLength >= blockBytes) {
          // A whole block in one chunk: a view of it, no copy.
          if (chunk.byteLength > blockBytes) carry = chunk.subarray(blockBytes);
          return { done: false, value: chunk.subarray(0, blockBytes) };
        }
        block ??= new Uint8Array(blockBytes);
        const n = Math.min(blockBytes - filled, chunk.byteLength);
        block.set(chunk.subarray(0, n), filled);
        filled += n;
        if (n < chunk.byteLength) carry = chunk.subarray(n);
        if (filled === blockBytes) return { done: false, value: block };
      }
      return filled ? { done: false, value: block!.subarray(0, filled) } : DONE;
    },
    cancel(reason) {
      ended = true;
      carry = undefined;
      return reader.cancel(reason);
    },
  };
}
