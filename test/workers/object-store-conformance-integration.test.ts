// One conformance suite for the ObjectStore contract (src/store/object-store.ts), run in workerd against both
// implementations: r2Store over miniflare's local R2 binding and s3Store over the real local S3 server started by
// the global setup. The same suite covers the streaming multipart upload and R2's part rules
// (src/store/multipart-upload.ts) on both stores. Then partSizeFor's arithmetic, and the S3 presigner against the
// real S3 server (a presigned URL works with plain fetch; a tampered or misused one is refused).
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { hashStream } from "../../src/store/hash-stream.ts";
import { R2_MULTIPART } from "../../container/contract/r2-limits.ts";
import { equalPartGuard, PartRuleError, partSizeFor, uploadStreamMultipart } from "../../src/store/multipart-upload.ts";
import { StoreError, type MultipartUpload, type ObjectStore } from "../../src/store/object-store.ts";
import { r2Store } from "../../src/store/r2-store.ts";
import { presign, s3Store, storedChecksumSha256, type S3Settings } from "../../src/store/s3-store.ts";
import { compositeSha256 } from "../../src/store/part-checksums.ts";
import { firstDifference, sha256Hex } from "./helpers.ts";

const MiB = 2 ** 20;
const GiB = 2 ** 30;

const s3Settings = (): S3Settings => ({
  endpoint: env.S3_ENDPOINT,
  bucket: env.S3_BUCKET,
  region: "auto",
  accessKeyId: env.S3_ACCESS_KEY_ID,
  secretAccessKey: env.S3_SECRET_ACCESS_KEY,
});

/** Random bytes (incompressible, and no period that could hide swapped or repeated parts). */
function randomBytes(size: number): Uint8Array {
  const out = new Uint8Array(size);
  for (let i = 0; i < size; i += 65_536) crypto.getRandomValues(out.subarray(i, Math.min(size, i + 65_536)));
  return out;
}

/** A stream that hands out `data` in chunks of the given sizes, then closes (or errors with `failWith`). */
function chunkedStream(data: Uint8Array, sizes: number[], failWith?: Error): ReadableStream<Uint8Array> {
  let offset = 0;
  let i = 0;
  return new ReadableStream<Uint8Array>({
    pull(c) {
      if (i < sizes.length) {
        const n = sizes[i++]!;
        c.enqueue(data.slice(offset, offset + n));
        offset += n;
      } else if (failWith) c.error(failWith);
      else c.close();
    },
  });
}

async function readAll(body: ReadableStream<Uint8Array>): Promise<Uint8Array> {
  return new Uint8Array(await new Response(body).arrayBuffer());
}


/** Passes every call through to the real upload and notes which part numbers reached the store. */
function recordParts(upload: MultipartUpload): { upload: MultipartUpload; seen: number[] } {
  const seen: number[] = [];
  return {
    seen,
    upload: {
      key: upload.key,
      uploadId: upload.uploadId,
      uploadPart: (n, body) => (seen.push(n), upload.uploadPart(n, body)),
      complete: (parts) => upload.complete(parts),
      abort: () => upload.abort(),
    },
  };
}

/** Passes every call through to the real store and notes the multipart uploads it created. */
function recordUploads(store: ObjectStore): { store: ObjectStore; uploads: MultipartUpload[] } {
  const uploads: MultipartUpload[] = [];
  return {
    uploads,
    store: {
      ...store,
      kind: store.kind,
      createMultipartUpload: async (key, options) => {
        const u = await store.createMultipartUpload(key, options);
        uploads.push(u);
        return u;
      },
    },
  };
}

function conformance(name: string, makeStore: () => ObjectStore) {
  const store = makeStore();
  const prefix = (label: string) => `conformance/${name}/${label}-${crypto.randomUUID()}/`;

  describe("put / get / head", () => {
    it("puts a string and gets back the same bytes and metadata", async () => {
      const key = `${prefix("string")}a.json`;
      const text = '{"hello":"wörld ✓"}';
      const put = await store.put(key, text, { contentType: "application/json", metadata: { snapshot: "s-1", "part-count": "0" } });
      const expected = new TextEncoder().encode(text);
      expect(put).toMatchObject({ key, size: expected.byteLength, metadata: { snapshot: "s-1", "part-count": "0" } });
      expect(put.etag).not.toBe("");

      const got = await store.get(key);
      expect(got).not.toBeNull();
      expect({ ...got!, body: undefined }).toEqual({ ...put, body: undefined });
      expect(new TextDecoder().decode(await readAll(got!.body))).toBe(text);
    });

    it("puts a Uint8Array byte for byte (all 256 byte values)", async () => {
      const key = `${prefix("bytes")}b.bin`;
      const data = new Uint8Array(4096).map((_, i) => (i * 7 + (i >> 8)) & 0xff);
      const put = await store.put(key, data, { metadata: { kind: "binary" } });
      expect(put.size).toBe(4096);
      const got = await store.get(key);
      expect(got!.metadata).toEqual({ kind: "binary" });
      expect(firstDifference(await readAll(got!.body), data)).toBe(-1);
    });

    it("puts a stream of known length, chunked unevenly", async () => {
      const key = `${prefix("stream")}c.bin`;
      const data = randomBytes(300_001);
      const put = await store.put(key, chunkedStream(data, [1, 65_536, 3, 200_000, 34_461]), { length: data.byteLength });
      expect(put.size).toBe(data.byteLength);
      const got = await store.get(key);
      expect(got!.size).toBe(data.byteLength);
      expect(firstDifference(await readAll(got!.body), data)).toBe(-1);
    });

    it("refuses a stream without a length with a StoreError naming the key, and stores nothing", async () => {
      const key = `${prefix("no-length")}d.bin`;
      const err = await store.put(key, chunkedStream(randomBytes(10), [10])).catch((e) => e);
      expect(err).toBeInstanceOf(StoreError);
      expect(err.key).toBe(key);
      expect(err.message).toMatch(/needs its length/);
      expect(await store.head(key)).toBeNull();
    });

    it("a body that does not match the sha256 the put names is refused by the store itself, and nothing is stored", async () => {
      // What binds a lying agent's bytes on the stream path: the Worker passes the SHA-256 the agent reported for
      // its staged archive, and the store (R2's put sha256; S3's x-amz-checksum-sha256) checks the body against it.
      const key = `${prefix("checksum")}e.bin`;
      const claimed = randomBytes(70_000);
      const sent = randomBytes(70_000);
      for (const body of [sent, chunkedStream(sent, [1000, 69_000])]) {
        const err = await store.put(key, body, { length: sent.byteLength, sha256: await sha256Hex(claimed) }).catch((e) => e);
        expect(err, "the store accepted bytes that do not match the named sha256").toBeInstanceOf(StoreError);
        expect(err.message).toMatch(/BadDigest|sha-?256|checksum|digest/i);
        expect(await store.head(key)).toBeNull();
      }
      // The honest put passes, with the same option.
      expect((await store.put(key, claimed, { sha256: await sha256Hex(claimed) })).size).toBe(claimed.byteLength);
    });

    it("get and head of a missing key are null", async () => {
      const key = `${prefix("missing")}nothing`;
      expect(await store.get(key)).toBeNull();
      expect(await store.head(key)).toBeNull();
    });

    it("a ranged get returns exactly the requested bytes; size stays the whole object's", async () => {
      const key = `${prefix("range")}r.bin`;
      const data = randomBytes(100_000);
      await store.put(key, data);
      for (const range of [{ offset: 0, length: 1 }, { offset: 12_345, length: 54_321 }, { offset: 99_990, length: 10 }]) {
        const got = await store.get(key, range);
        const bytes = await readAll(got!.body);
        expect(bytes.byteLength).toBe(range.length);
        expect(firstDifference(bytes, data.subarray(range.offset, range.offset + range.length))).toBe(-1);
        expect(got!.size).toBe(100_000);
      }
    });

    it("head reports size and metadata without the body", async () => {
      const key = `${prefix("head")}h.txt`;
      await store.put(key, "x".repeat(777), { metadata: { sha256: "abc", bytes: "777" } });
      const head = await store.head(key);
      expect(head).toMatchObject({ key, size: 777, metadata: { sha256: "abc", bytes: "777" } });
      expect(head).not.toHaveProperty("body");
    });

    it("head reports the whole-object SHA-256 the store keeps: the one a put carried, none after a put without one", async () => {
      // What dedup reads before it reuses a chunk (missing-chunks.ts). SeaweedFS answers HeadObject in checksum
      // mode with x-amz-checksum-sha256; the R2 binding gives R2Object.checksums.sha256. Both keep it only when
      // the write carried it, and an overwrite without one drops it (no stale checksum describes other bytes).
      const key = `${prefix("head-sha256")}c.bin`;
      const data = randomBytes(5000);
      const sha = await sha256Hex(data);
      const put = await store.put(key, data, { sha256: sha });
      expect(put.sha256).toBe(sha);
      expect((await store.head(key))?.sha256).toBe(sha);
      const other = randomBytes(5000);
      await store.put(key, other);
      const head = await store.head(key);
      expect(head?.size).toBe(5000);
      expect(head?.sha256).toBeUndefined();
      const otherSha = await sha256Hex(other);
      await store.put(key, other, { sha256: otherSha });
      expect((await store.head(key))?.sha256).toBe(otherSha);
      if (store.kind === "s3") {
        // A presigned PUT bound to the hash by the signed query parameter (how the agent uploads chunks) is kept too.
        const url = await presign(s3Settings(), key, "PUT", 300, { "x-amz-checksum-sha256": btoa(String.fromCharCode(...(sha.match(/../g) ?? []).map((b) => parseInt(b, 16)))) });
        const r = await fetch(url, { method: "PUT", body: data });
        expect(r.status).toBe(200);
        await r.body?.cancel();
        expect((await store.head(key))?.sha256).toBe(sha);
      }
      // A multipart object has no whole-object SHA-256 (S3's is a composite of the parts, "base64-N"): none.
      const mpu = `${prefix("head-sha256-mpu")}m.bin`;
      const upload = await store.createMultipartUpload(mpu, store.kind === "s3" ? { partChecksums: "sha256" } : {});
      const p1 = await upload.uploadPart(1, data);
      await upload.complete([{ ...p1, ...(store.kind === "s3" ? { sha256: sha } : {}) }]);
      expect((await store.head(mpu))?.sha256).toBeUndefined();
    });

    it("a second put replaces the object and its metadata", async () => {
      const key = `${prefix("overwrite")}o.txt`;
      await store.put(key, "first version", { metadata: { v: "1" } });
      await store.put(key, "2nd", { metadata: { v: "2" } });
      const got = await store.get(key);
      expect(got!.metadata).toEqual({ v: "2" });
      expect(new TextDecoder().decode(await readAll(got!.body))).toBe("2nd");
    });
  });

  describe("list / delete", () => {
    it("lists by prefix only, and pages with a cursor when there are more keys than the limit", async () => {
      const p = prefix("list");
      const keys = Array.from({ length: 7 }, (_, i) => `${p}k${i}`);
      await Promise.all(keys.map((k, i) => store.put(k, "y".repeat(i))));
      // A sibling that shares the prefix's text up to its last character must not be listed.
      const sibling = `${p.slice(0, -1)}-sibling/x`;
      await store.put(sibling, "z");

      const before = Date.now();
      const all = await store.list(p);
      expect(all.objects.map(({ key, size }) => ({ key, size }))).toEqual(keys.map((key, i) => ({ key, size: i })));
      expect(all.cursor).toBeUndefined();
      // When each was written (the chunk collector's grace period reads it): S3 says it to the second.
      for (const o of all.objects) expect(Math.abs(o.uploaded - before)).toBeLessThan(60_000);

      const paged: string[] = [];
      let cursor: string | undefined;
      let pages = 0;
      do {
        const page = await store.list(p, { limit: 3, cursor });
        expect(page.objects.length).toBeLessThanOrEqual(3);
        paged.push(...page.objects.map((o) => o.key));
        cursor = page.cursor;
        pages++;
      } while (cursor && pages < 10);
      expect(paged).toEqual(keys);
      expect(pages).toBe(3);
    });

    it("deletes present keys (one or many) and ignores missing ones", async () => {
      const p = prefix("delete");
      await Promise.all(["a", "b", "c"].map((k) => store.put(`${p}${k}`, k)));
      await store.delete(`${p}a`);
      expect(await store.head(`${p}a`)).toBeNull();
      await store.delete([`${p}b`, `${p}c`, `${p}never-existed`]);
      await store.delete(`${p}never-existed`);
      await store.delete(`${p}a`); // again: cleanup can be retried
      expect((await store.list(p)).objects).toEqual([]);
    });
  });

  describe("conditional put (the compare-and-swap leases use)", () => {
    it("writes only when absent, or when the etag still matches; otherwise answers null and changes nothing", async () => {
      const key = `${prefix("cas")}lease.json`;
      const first = await store.putIf(key, "one", { absent: true });
      expect(first?.etag).toBeTruthy();
      expect(await store.putIf(key, "two", { absent: true })).toBeNull();
      expect(await store.putIf(key, "three", { etag: "0123456789abcdef0123456789abcdef" })).toBeNull();
      const swapped = await store.putIf(key, "four", { etag: first!.etag });
      expect(swapped?.etag).toBeTruthy();
      expect(await store.putIf(key, "five", { etag: first!.etag })).toBeNull();
      expect(await new Response((await store.get(key))!.body).text()).toBe("four");
    });

    it("of two racing creates, exactly one wins", async () => {
      const key = `${prefix("race")}lease.json`;
      const results = await Promise.all(["a", "b", "c", "d"].map((v) => store.putIf(key, v, { absent: true })));
      expect(results.filter(Boolean)).toHaveLength(1);
    });
  });

  describe("multipart", () => {
    it("create → upload parts (one through a resumed handle) → complete gives the concatenation and metadata", async () => {
      const key = `${prefix("mpu")}m.bin`;
      const part1 = randomBytes(5 * MiB);
      const part2 = randomBytes(1024 + 3);
      const upload = await store.createMultipartUpload(key, { metadata: { sha256: "whatever" } });
      expect(upload.key).toBe(key);
      expect(upload.uploadId).not.toBe("");
      const p1 = await upload.uploadPart(1, part1);
      const p2 = await store.resumeMultipartUpload(key, upload.uploadId).uploadPart(2, part2);
      expect(p1.partNumber).toBe(1);
      expect(p2.partNumber).toBe(2);
      // Completion order of the list does not matter.
      const done = await upload.complete([p2, p1]);
      expect(done).toMatchObject({ key, size: part1.byteLength + part2.byteLength, metadata: { sha256: "whatever" } });

      const got = await store.get(key);
      const bytes = await readAll(got!.body);
      expect(firstDifference(bytes.subarray(0, part1.byteLength), part1)).toBe(-1);
      expect(firstDifference(bytes.subarray(part1.byteLength), part2)).toBe(-1);
      expect(got!.metadata).toEqual({ sha256: "whatever" });
    });

    it("part checksums: S3 checks each part's SHA-256 at completion and keeps their composite; the R2 binding refuses the option", async () => {
      const key = `${prefix("part-sha256")}p.bin`;
      const part = randomBytes(70_000);
      if (store.kind === "r2") {
        // The binding can neither keep nor check part hashes: it says so instead of completing as if it had.
        await expect(store.createMultipartUpload(key, { partChecksums: "sha256" })).rejects.toMatchObject({ kind: "permanent" });
        const upload = await store.createMultipartUpload(key);
        const p1 = await upload.uploadPart(1, part);
        await expect(upload.complete([{ ...p1, sha256: await sha256Hex(part) }])).rejects.toMatchObject({ kind: "permanent", message: expect.stringMatching(/cannot check part checksums/) });
        await upload.abort();
        expect(await store.head(key)).toBeNull();
        return;
      }
      const upload = await store.createMultipartUpload(key, { partChecksums: "sha256" });
      const p1 = await upload.uploadPart(1, part);
      const lie = await upload.complete([{ ...p1, sha256: await sha256Hex(randomBytes(70_000)) }]).catch((e) => e);
      expect(lie).toMatchObject({ status: 400, kind: "permanent", message: expect.stringMatching(/BadDigest/) });
      expect(await store.head(key)).toBeNull();
      // The upload is still open: the true hash completes it.
      expect((await upload.complete([{ ...p1, sha256: await sha256Hex(part) }])).size).toBe(part.byteLength);
      expect(await storedChecksumSha256(s3Settings(), key)).toBe(await compositeSha256([await sha256Hex(part)]));
    });

    it("abort leaves no object, and the upload can take no more parts", async () => {
      const key = `${prefix("abort")}a.bin`;
      const upload = await store.createMultipartUpload(key);
      await upload.uploadPart(1, randomBytes(1000));
      await upload.abort();
      expect(await store.head(key)).toBeNull();
      expect((await store.list(key)).objects).toEqual([]);
      await expect(store.resumeMultipartUpload(key, upload.uploadId).uploadPart(2, randomBytes(10))).rejects.toThrow();
    });
  });

  describe("uploadStreamMultipart", () => {
    it("cuts a stream of awkward chunk sizes into equal 5 MiB parts, storing exactly what was sent", async () => {
      const key = `${prefix("stream-mpu")}s.bin`;
      const sizes = [1, 3 * MiB + 7, 2 * MiB - 8, 1, 65_537, 4 * MiB, 3 * MiB + 1, 17, MiB - 65_000];
      const total = sizes.reduce((a, b) => a + b, 0);
      expect(total).toBeGreaterThan(10 * MiB); // so: two full parts and a short third
      expect(total).toBeLessThan(14 * MiB);
      const data = randomBytes(total);
      const expectedSha = await sha256Hex(data);
      const progress: number[] = [];

      const r = await uploadStreamMultipart(store, key, chunkedStream(data, sizes), { partSize: 5 * MiB, metadata: { m: "1" }, onProgress: (b) => progress.push(b) });
      expect(r.parts).toBe(3);
      expect(r.bytes).toBe(total);
      expect(r.sha256).toBe(expectedSha);
      expect(r.object).toMatchObject({ key, size: total, metadata: { m: "1" } });
      expect(progress.at(-1)).toBe(total);

      const stored = await readAll((await store.get(key))!.body);
      expect(stored.byteLength).toBe(total);
      expect(firstDifference(stored, data)).toBe(-1);
      expect(await hashStream((await store.get(key))!.body)).toEqual({ bytes: total, sha256: expectedSha });
    });

    it("completes when parts finish out of order (concurrent uploads: the short last part overtakes part 2)", async () => {
      const key = `${prefix("stream-order")}o.bin`;
      // Part 2 reaches the real store 300 ms late, so part 3 finishes first and the part list is [1, 3, 2].
      const slowPart2: ObjectStore = {
        ...store,
        createMultipartUpload: async (k, options) => {
          const u = await store.createMultipartUpload(k, options);
          return { ...u, key: u.key, uploadId: u.uploadId, uploadPart: async (n, body) => {
            if (n === 2) await new Promise((r) => setTimeout(r, 300));
            return u.uploadPart(n, body);
          } };
        },
      };
      const data = randomBytes(10 * MiB + 100);
      const r = await uploadStreamMultipart(slowPart2, key, chunkedStream(data, [10 * MiB + 100]), { partSize: 5 * MiB, concurrency: 2 });
      expect(r.parts).toBe(3);
      expect(firstDifference(await readAll((await store.get(key))!.body), data)).toBe(-1);
    });

    it("a body within its first part goes as one PUT bound to its SHA-256: no multipart upload is made", async () => {
      const key = `${prefix("stream-small")}p.bin`;
      const { store: recorded, uploads } = recordUploads(store);
      const data = randomBytes(5 * MiB - 3);
      const r = await uploadStreamMultipart(recorded, key, chunkedStream(data, [MiB, 4 * MiB - 3]), { partSize: 5 * MiB, metadata: { m: "2" } });
      expect(uploads).toHaveLength(0);
      expect(r).toMatchObject({ bytes: data.byteLength, parts: 1, sha256: await sha256Hex(data) });
      expect(r.object).toMatchObject({ key, size: data.byteLength, metadata: { m: "2" }, sha256: r.sha256 });
      expect(firstDifference(await readAll((await store.get(key))!.body), data)).toBe(-1);
    });

    it("an empty stream gives a valid 0-byte object", async () => {
      const key = `${prefix("stream-empty")}e.bin`;
      const r = await uploadStreamMultipart(store, key, chunkedStream(new Uint8Array(0), []), { partSize: 5 * MiB });
      const emptySha = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
      expect(r).toMatchObject({ bytes: 0, parts: 1, sha256: emptySha });
      expect((await store.head(key))!.size).toBe(0);
      expect(await hashStream((await store.get(key))!.body)).toEqual({ bytes: 0, sha256: emptySha });
    });

    it("a stream that errors mid-way rejects with its error, aborts the upload and leaves no object", async () => {
      const key = `${prefix("stream-error")}x.bin`;
      const { store: recorded, uploads } = recordUploads(store);
      // 6 MiB first, so one part has already reached the store when the stream fails.
      const body = chunkedStream(randomBytes(6 * MiB + 5), [3 * MiB, 3 * MiB + 5], new Error("tar died"));
      await expect(uploadStreamMultipart(recorded, key, body, { partSize: 5 * MiB })).rejects.toThrow("tar died");
      expect(await store.head(key)).toBeNull();
      expect((await store.list(key)).objects).toEqual([]);
      expect(uploads).toHaveLength(1);
      // Aborted, not merely abandoned: the store no longer takes parts for it.
      await expect(store.resumeMultipartUpload(key, uploads[0]!.uploadId).uploadPart(3, randomBytes(10))).rejects.toThrow();
    });
  });

  describe("equalPartGuard", () => {
    it("refuses a part larger than the part size before the store sees it", async () => {
      const key = `${prefix("guard-big")}g.bin`;
      const { upload, seen } = recordParts(await store.createMultipartUpload(key));
      const guard = equalPartGuard(upload, 5 * MiB);
      await expect(guard.uploadPart(1, new Uint8Array(5 * MiB + 1))).rejects.toThrow(PartRuleError);
      await expect(guard.uploadPart(0, new Uint8Array(1))).rejects.toThrow(PartRuleError);
      await expect(guard.uploadPart(R2_MULTIPART.maxParts + 1, new Uint8Array(1))).rejects.toThrow(PartRuleError);
      expect(seen).toEqual([]);
      await guard.abort();
    });

    it("refuses to complete when a non-final part is shorter than the part size (R2 error 10048)", async () => {
      const key = `${prefix("guard-unequal")}g.bin`;
      const guard = equalPartGuard(await store.createMultipartUpload(key), 6 * MiB);
      // Both parts are valid for S3 (≥ 5 MiB but the last), but part 1 is not the agreed 6 MiB.
      const parts = [await guard.uploadPart(1, randomBytes(5 * MiB)), await guard.uploadPart(2, randomBytes(100))];
      await expect(guard.complete(parts)).rejects.toThrow(/part 1 has 5242880 bytes but every part except the last must have exactly 6291456/);
      expect(await store.head(key)).toBeNull();
      await guard.abort();
    });

    it("refuses a part size below 5 MiB", async () => {
      const key = `${prefix("guard-small")}g.bin`;
      const upload = await store.createMultipartUpload(key);
      expect(() => equalPartGuard(upload, 5 * MiB - 1)).toThrow(PartRuleError);
      expect(() => equalPartGuard(upload, 5 * MiB)).not.toThrow();
      await upload.abort();
    });

    it("refuses gaps in part numbers, and parts it did not upload", async () => {
      const key = `${prefix("guard-gap")}g.bin`;
      const guard = equalPartGuard(await store.createMultipartUpload(key), 5 * MiB);
      const p1 = await guard.uploadPart(1, randomBytes(5 * MiB));
      const p3 = await guard.uploadPart(3, randomBytes(10));
      await expect(guard.complete([p1, p3])).rejects.toThrow(/without gaps, found 3 at position 2/);
      await expect(guard.complete([p1, { partNumber: 2, etag: "made-up" }])).rejects.toThrow(/part 2 was not uploaded through this upload/);
      expect(await store.head(key)).toBeNull();
      await guard.abort();
    });
  });
}

describe.each<[string, () => ObjectStore]>([
  ["r2", () => r2Store(env.SNAPSHOTS)],
  ["s3", () => s3Store(s3Settings())],
])("ObjectStore conformance: %s", (name, makeStore) => conformance(name, makeStore));

describe("partSizeFor", () => {
  it("is at least 5 MiB (and the 8 MiB default minimum), in whole MiB", () => {
    expect(partSizeFor(0)).toBe(8 * MiB);
    expect(partSizeFor(0, 0)).toBe(5 * MiB);
    expect(partSizeFor(1, 1)).toBe(5 * MiB);
    for (const bytes of [0, 1, 123_456_789, 2e9, 10 * GiB + 1, 100 * GiB, 3 * 10 ** 13]) {
      const size = partSizeFor(bytes, 0);
      expect(size).toBeGreaterThanOrEqual(R2_MULTIPART.minPartBytes);
      expect(size % MiB, `${bytes} → ${size}`).toBe(0);
    }
  });

  it("keeps 2 GB under 10,000 parts even with 25% more bytes than expected", () => {
    const size = partSizeFor(2e9);
    expect(Math.ceil((2e9 * 1.25) / size)).toBeLessThanOrEqual(R2_MULTIPART.maxParts);
  });

  it("for 100 GiB picks parts so that 125 GiB fit in 10,000, and no larger than needed", () => {
    const size = partSizeFor(100 * GiB);
    expect(Math.ceil((125 * GiB) / size)).toBeLessThanOrEqual(R2_MULTIPART.maxParts);
    // One MiB less would not fit: the rounding is up, not wasteful.
    expect(Math.ceil((125 * GiB) / (size - MiB))).toBeGreaterThan(R2_MULTIPART.maxParts);
  });

  it("throws PartRuleError above 5 GiB × 10,000", () => {
    expect(() => partSizeFor(5 * GiB * 10_000 + 1)).toThrow(PartRuleError);
    expect(() => partSizeFor(2 ** 50)).toThrow(PartRuleError);
    // With the 25% margin, the largest accepted estimate is 4 GiB × 10,000.
    expect(partSizeFor(4 * GiB * 10_000)).toBe(5 * GiB);
  });
});

describe("presign (S3)", () => {
  const s = s3Settings();
  const store = s3Store(s);
  const key = (label: string) => `presign/${label}-${crypto.randomUUID()}/obj name ✓.txt`;

  it("a presigned GET URL fetches the object with plain fetch, no auth headers", async () => {
    const k = key("get");
    await store.put(k, "presigned body");
    const url = await presign(s, k, "GET", 300);
    expect(url).toContain("X-Amz-Signature=");
    const r = await fetch(url);
    expect(r.status).toBe(200);
    expect(await r.text()).toBe("presigned body");
  });

  it("a presigned PUT URL uploads the object", async () => {
    const k = key("put");
    const data = randomBytes(70_000);
    const r = await fetch(await presign(s, k, "PUT", 300), { method: "PUT", body: data });
    expect(r.status).toBe(200);
    await r.body?.cancel();
    const got = await store.get(k);
    expect(got!.size).toBe(data.byteLength);
    expect(firstDifference(await readAll(got!.body), data)).toBe(-1);
  });

  it("a tampered signature, another key or another method is refused with 403", async () => {
    const k = key("tamper");
    const other = key("other");
    await store.put(k, "secret");
    await store.put(other, "other secret");
    const url = new URL(await presign(s, k, "GET", 300));

    const tampered = new URL(url);
    const sig = tampered.searchParams.get("X-Amz-Signature")!;
    tampered.searchParams.set("X-Amz-Signature", sig.slice(0, -1) + (sig.endsWith("0") ? "1" : "0"));
    const forOther = new URL(url);
    forOther.pathname = new URL((await presign(s, other, "GET", 300))).pathname;

    for (const [what, u, method] of [["tampered", tampered, "GET"], ["other key", forOther, "GET"], ["GET URL used to PUT", url, "PUT"]] as const) {
      const r = await fetch(u, method === "PUT" ? { method, body: "overwritten" } : undefined);
      expect(r.status, what).toBe(403);
      await r.body?.cancel();
    }
    // Nothing was overwritten.
    expect(new TextDecoder().decode(await readAll((await store.get(k))!.body))).toBe("secret");
  });
});
