// A pass-through that counts and hashes what flows through it, so a file written or an archive streamed
// gets its size and SHA-256 without a second read.
import { createHash } from "node:crypto";
import { Transform } from "node:stream";

export class HashingStream extends Transform {
  bytes = 0;
  private hash = createHash("sha256");
  override _transform(chunk: Buffer, _enc: BufferEncoding, done: (e?: Error | null, data?: Buffer) => void) {
    this.bytes += chunk.length;
    this.hash.update(chunk);
    done(null, chunk);
  }
  digest(): string {
    return this.hash.digest("hex");
  }
}
