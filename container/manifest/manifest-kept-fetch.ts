// A delta's base that this sandbox has not kept (a fresh container: the agent's area starts empty) but that the store
// holds whole: its manifest is downloaded into the kept place as it is stored, unparsed, so that the native engine
// reads it as it reads a kept copy, and checks its SHA-256 against the record's (manifest-kept.ts keeps the others).
// A layered base (a delta's layer over the manifests below it) is not one file: the agent's own pass reads that chain.
import { createWriteStream } from "node:fs";
import { rename, rm } from "node:fs/promises";
import { Readable, Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import { checkUrl } from "../transfer/check-url.ts";

/**
 * Downloads the stored manifest at `url` to `file` (through `${file}.tmp`), refusing more than `limit` bytes; answers
 * whether it is there. Never fails the backup: without it, the agent's own pass reads the base from the store.
 */
export async function fetchKept(url: string, file: string, limit: number): Promise<boolean> {
  const tmp = `${file}.tmp`;
  try {
    const r = await fetch(checkUrl(url, "base.url"));
    if (!r.ok || !r.body) {
      await r.body?.cancel().catch(() => {});
      return false;
    }
    let seen = 0;
    const bounded = new Transform({
      transform(chunk: Buffer, _enc, done) {
        seen += chunk.length;
        done(seen > limit ? new Error(`over ${limit} bytes`) : null, chunk);
      },
    });
    await pipeline(Readable.fromWeb(r.body as import("node:stream/web").ReadableStream<Uint8Array>), bounded, createWriteStream(tmp));
    await rename(tmp, file);
    return true;
  } catch (e) {
    console.warn(`base manifest not fetched to ${file}: ${e instanceof Error ? e.message : String(e)}`);
    await rm(tmp, { force: true });
    return false;
  }
}
