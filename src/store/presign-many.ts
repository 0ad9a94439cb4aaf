// Presigned GETs for many keys at once (a lazy restore's chunks: 8686 for a 5 GB image), signed synchronously with
// one derived key. aws4fetch signs one URL per call through WebCrypto's async HMAC and digest: 756–1126 ms for
// 8686 URLs in workerd here, a cost paid before the workspace is mounted and growing with the image. The same
// SigV4 query signature (AWS's "presigned URL" form, UNSIGNED-PAYLOAD, host the only signed header), with
// node:crypto's synchronous HMAC, takes a tenth of that. presign-many-unit checks each URL's signature against
// aws4fetch's for the same instant, and the lazy restore tests fetch every chunk through these URLs.
import { createHash, createHmac } from "node:crypto";
import { objectUrl, type S3Settings } from "./s3-store.ts";

/** aws4fetch's RFC 3986 touch-up of encodeURIComponent (which leaves !'()* alone). */
const rfc3986 = (s: string) => encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);

/** The path as SigV4 canonicalizes it for S3: each segment encoded once, '/' kept. */
function canonicalPath(pathname: string): string {
  return decodeURIComponent(pathname).split("/").map(rfc3986).join("/");
}

export function presignGets(s: S3Settings, keys: readonly string[], expiresSeconds: number, now = new Date()): string[] {
  const datetime = now.toISOString().replace(/[:-]|\.\d{3}/g, "");
  const date = datetime.slice(0, 8);
  const scope = `${date}/${s.region}/s3/aws4_request`;
  let signingKey = createHmac("sha256", `AWS4${s.secretAccessKey}`).update(date).digest();
  for (const part of [s.region, "s3", "aws4_request"]) signingKey = createHmac("sha256", signingKey).update(part).digest();
  const params: [string, string][] = [
    ["X-Amz-Algorithm", "AWS4-HMAC-SHA256"],
    ["X-Amz-Credential", `${s.accessKeyId}/${scope}`],
    ["X-Amz-Date", datetime],
    ["X-Amz-Expires", String(expiresSeconds)],
    ["X-Amz-SignedHeaders", "host"],
  ];
  // Already in the canonical (sorted) order.
  const query = params.map(([k, v]) => `${rfc3986(k)}=${rfc3986(v)}`).join("&");
  // The bucket's URL once; a key's segments are appended as objectUrl encodes them.
  const bucket = objectUrl(s, "");
  const canonicalBucket = canonicalPath(bucket.pathname);
  const head = `${bucket.origin}${bucket.pathname}`;
  const canonicalTail = `\n${query}\nhost:${bucket.host}\n\nhost\nUNSIGNED-PAYLOAD`;
  return keys.map((key) => {
    const segments = key.split("/");
    const canonical = `GET\n${canonicalBucket}${segments.map(rfc3986).join("/")}${canonicalTail}`;
    const stringToSign = `AWS4-HMAC-SHA256\n${datetime}\n${scope}\n${createHash("sha256").update(canonical).digest("hex")}`;
    const signature = createHmac("sha256", signingKey).update(stringToSign).digest("hex");
    return `${head}${segments.map(encodeURIComponent).join("/")}?${query}&X-Amz-Signature=${signature}`;
  });
}
