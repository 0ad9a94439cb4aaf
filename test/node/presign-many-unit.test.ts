// presign-many.ts signs many GET URLs synchronously; aws4fetch (whose URLs the store accepts: object-store-conformance
// and the presigned transfer tests) is the reference. Same instant, same credentials: the same signature, for keys
// that need encoding too.
import { AwsClient } from "aws4fetch";
import { describe, expect, it } from "vitest";
import { presignGets } from "../../src/store/presign-many.ts";
import { objectUrl } from "../../src/store/s3-store.ts";

const s = { endpoint: "http://127.0.0.1:9000/", bucket: "snapflow-test", region: "auto", accessKeyId: "AKEXAMPLE0123456789", secretAccessKey: "secret/with+chars=0123456789abcdefghij" };
const at = new Date("2026-11-24T11:47:16.123Z");

async function reference(key: string, expires: number): Promise<URL> {
  const u = objectUrl(s, key);
  u.searchParams.set("X-Amz-Expires", String(expires));
  const client = new AwsClient({ accessKeyId: s.accessKeyId, secretAccessKey: s.secretAccessKey, service: "s3", region: s.region });
  return new URL((await client.sign(u.toString(), { method: "GET", aws: { signQuery: true, datetime: "20261124T114716Z" } })).url);
}

describe("presignGets", () => {
  const keys = [
    `chunks/${"ab".repeat(32)}`,
    "snapshots/bk-1/archive.tar.zst",
    "odd/a key with spaces/(parens)!*'/ünïcode+plus=eq&amp",
  ];

  it("gives each key aws4fetch's signature, in the keys' order", async () => {
    const got = presignGets(s, keys, 900, at).map((x) => new URL(x));
    expect(got).toHaveLength(keys.length);
    for (const [i, key] of keys.entries()) {
      const want = await reference(key, 900);
      expect(got[i]!.pathname, key).toBe(want.pathname);
      expect(got[i]!.searchParams.get("X-Amz-Signature"), key).toBe(want.searchParams.get("X-Amz-Signature"));
      for (const p of ["X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires", "X-Amz-SignedHeaders"]) expect(got[i]!.searchParams.get(p), p).toBe(want.searchParams.get(p));
    }
  });

  it("signs the expiry into the URL: another expiry, another signature", async () => {
    const [a] = presignGets(s, keys.slice(0, 1), 900, at);
    const [b] = presignGets(s, keys.slice(0, 1), 60, at);
    expect(new URL(b!).searchParams.get("X-Amz-Signature")).toBe((await reference(keys[0]!, 60)).searchParams.get("X-Amz-Signature"));
    expect(new URL(a!).searchParams.get("X-Amz-Signature")).not.toBe(new URL(b!).searchParams.get("X-Amz-Signature"));
  });
});
