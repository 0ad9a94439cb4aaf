// Chunk keys per tenant (src/chunks/chunk-keys.ts): the default tenant keeps the keys every chunk had before tenants,
// any other its own prefix, and the collector's parser reads both back — and nothing else as a chunk.
import { expect, it } from "vitest";
import { chunkKey, chunkOfKey, digestOfKey } from "../../src/chunks/chunk-keys.ts";

const x = "ab".repeat(32);

it("the default tenant's chunks keep chunks/<sha256>; another tenant's live under chunks/t/<tenant>/", () => {
  expect(chunkKey("default", x)).toBe(`chunks/${x}`);
  expect(chunkKey("acme-1", x)).toBe(`chunks/t/acme-1/${x}`);
  expect(chunkKey("t", x)).toBe(`chunks/t/t/${x}`);
});

it("digestOfKey and chunkOfKey read both forms back, and take nothing else for a chunk", () => {
  for (const tenant of ["default", "acme-1", "t", "a".repeat(63)]) {
    expect(chunkOfKey(chunkKey(tenant, x))).toEqual({ tenant, digest: x });
    expect(digestOfKey(chunkKey(tenant, x))).toBe(x);
  }
  for (const key of [`chunks/t/default/${x}`, `chunks/t/${x}`, `chunks/t/a/b/${x}`, `chunks/t/A/${x}`, `chunks/t//${x}`, `chunks/t/a/${x}/`, `chunks/${x}/x`, `chunks/${x.toUpperCase()}`, `snapshots/${x}`, "chunks/t/a/x", `xchunks/${x}`]) {
    expect(chunkOfKey(key), key).toBeNull();
    expect(digestOfKey(key), key).toBeNull();
  }
});
