// ObjectStore over the S3 API with aws4fetch: R2's S3 endpoint in production, the local S3 server in the
// embedded stack. Path-style URLs (`${endpoint}/${bucket}/${key}`), which both accept. aws4fetch's own retries
// are off: a streamed body cannot be replayed, and Workflow steps already retry the whole operation.
import { AwsClient } from "aws4fetch";
import { XMLParser } from "fast-xml-parser";
import { describeS3Error } from "../../container/contract/s3-error.ts";
import { StoreError, withLength, type MultipartUpload, type ObjectInfo, type ObjectStore, type UploadedPart } from "./object-store.ts";

export interface S3Settings {
  endpoint: string;
  bucket: string;
  region: string;
  accessKeyId: string;
  secretAccessKey: string;
}

const xml = new XMLParser({ ignoreAttributes: true, parseTagValue: false, isArray: (name) => name === "Contents" || name === "Upload" });

/** One client per credentials, kept: aws4fetch caches the derived signing key in its client, for the next signature. */
const clients = new Map<string, AwsClient>();

export function s3Client(s: S3Settings): AwsClient {
  const id = [s.accessKeyId, s.secretAccessKey, s.region].join("\n");
  let client = clients.get(id);
  if (!client) clients.set(id, (client = new AwsClient({ accessKeyId: s.accessKeyId, secretAccessKey: s.secretAccessKey, service: "s3", region: s.region, retries: 0 })));
  return client;
}

/** S3 checksum headers carry base64; snapflow keeps hex. */
export function hexToBase64(hex: string): string {
  return btoa(String.fromCharCode(...(hex.match(/../g) ?? []).map((b) => parseInt(b, 16))));
}

/**
 * A whole-object SHA-256 from x-amz-checksum-sha256 (base64) as hex; undefined for none, for a composite
 * ("base64-N": a multipart upload's hash of its parts' hashes), or for anything that is not 32 bytes of base64.
 */
export function wholeSha256(header: string | null): string | undefined {
  if (!header || !/^[A-Za-z0-9+/]{43}=$/.test(header)) return undefined;
  return [...atob(header)].map((c) => c.charCodeAt(0).toString(16).padStart(2, "0")).join("");
}

/** The URL of a key. Each segment is percent-encoded; '/' stays a separator. */
export function objectUrl(s: S3Settings, key: string): URL {
  const path = key.split("/").map(encodeURIComponent).join("/");
  return new URL(`${s.endpoint.replace(/\/+$/, "")}/${s.bucket}/${path}`);
}

function metadataHeaders(metadata: Record<string, string> = {}, contentType?: string): Record<string, string> {
  const h: Record<string, string> = Object.fromEntries(Object.entries(metadata).map(([k, v]) => [`x-amz-meta-${k.toLowerCase()}`, v]));
  if (contentType) h["content-type"] = contentType;
  return h;
}

function infoFrom(key: string, r: Response): ObjectInfo {
  const metadata: Record<string, string> = {};
  r.headers.forEach((v, k) => {
    if (k.startsWith("x-amz-meta-")) metadata[k.slice("x-amz-meta-".length)] = v;
  });
  const range = r.headers.get("content-range")?.match(/\/(\d+)$/)?.[1];
  const sha256 = wholeSha256(r.headers.get("x-amz-checksum-sha256"));
  return { key, size: Number(range ?? r.headers.get("content-length") ?? 0), etag: (r.headers.get("etag") ?? "").replaceAll('"', ""), metadata, ...(sha256 ? { sha256 } : {}) };
}

/** One <Part> of a CompleteMultipartUpload body; with its SHA-256, which the store checks against the part it holds. */
function completedPartXml(key: string, p: UploadedPart): string {
  if (/[<>&"]/.test(p.etag)) throw new StoreError(key, `part ${p.partNumber}: an ETag holding XML markup cannot go into a completion`, undefined, "permanent");
  const checksum = p.sha256 ? `<ChecksumSHA256>${hexToBase64(p.sha256)}</ChecksumSHA256>` : "";
  return `<Part><PartNumber>${p.partNumber}</PartNumber><ETag>"${p.etag}"</ETag>${checksum}</Part>`;
}

async function failure(key: string, what: string, r: Response): Promise<StoreError> {
  const body = await r.text().catch(() => "");
  return new StoreError(key, `${what} failed: ${describeS3Error(r.status, body)}`, r.status);
}

export function s3Store(s: S3Settings): ObjectStore {
  const aws = s3Client(s);

  const multipart = (key: string, uploadId: string): MultipartUpload => {
    const url = (params: Record<string, string>) => {
      const u = objectUrl(s, key);
      for (const [k, v] of Object.entries(params)) u.searchParams.set(k, v);
      return u;
    };
    return {
      key,
      uploadId,
      async uploadPart(partNumber, body) {
        const r = await aws.fetch(url({ partNumber: String(partNumber), uploadId }), { method: "PUT", body });
        if (!r.ok) throw await failure(key, `upload part ${partNumber}`, r);
        await r.body?.cancel();
        return { partNumber, etag: (r.headers.get("etag") ?? "").replaceAll('"', "") };
      },
      async complete(parts) {
        const body =
          "<CompleteMultipartUpload>" +
          [...parts].sort((a, b) => a.partNumber - b.partNumber)
            .map((p) => completedPartXml(key, p)).join("") +
          "</CompleteMultipartUpload>";
        const r = await aws.fetch(url({ uploadId }), { method: "POST", body });
        const text = await r.text();
        // S3 can answer 200 with an <Error> body for a failed completion.
        if (!r.ok || text.includes("<Error>")) throw await failure(key, "complete multipart upload", new Response(text, { status: r.ok ? 500 : r.status }));
        const head = await store.head(key);
        if (!head) throw new StoreError(key, "completed multipart upload is not readable");
        return head;
      },
      async abort() {
        const r = await aws.fetch(url({ uploadId }), { method: "DELETE" });
        await r.body?.cancel();
        if (!r.ok && r.status !== 404) throw await failure(key, "abort multipart upload", r);
      },
    };
  };

  const store: ObjectStore = {
    kind: "s3",
    async put(key, body, options = {}) {
      let value: BodyInit = body;
      if (body instanceof ReadableStream) {
        if (options.length === undefined) throw new StoreError(key, "a stream put needs its length; use a multipart upload for unknown lengths", undefined, "permanent");
        value = withLength(body, options.length);
      }
      const headers = metadataHeaders(options.metadata, options.contentType);
      // The store checks the body against it (BadDigest otherwise).
      if (options.sha256) headers["x-amz-checksum-sha256"] = hexToBase64(options.sha256);
      const r = await aws.fetch(objectUrl(s, key), { method: "PUT", body: value, headers });
      if (!r.ok) throw await failure(key, "put", r);
      await r.body?.cancel();
      const head = await store.head(key);
      if (!head) throw new StoreError(key, "object not found right after put");
      return head;
    },
    async putIf(key, body, condition, options = {}) {
      const headers = metadataHeaders(options.metadata, options.contentType);
      if ("absent" in condition) headers["if-none-match"] = "*";
      else headers["if-match"] = `"${condition.etag}"`;
      const r = await aws.fetch(objectUrl(s, key), { method: "PUT", body, headers });
      // 412: the condition did not hold; 409: another conditional write to the key was in flight (it won).
      if (r.status === 412 || r.status === 409) {
        await r.body?.cancel();
        return null;
      }
      if (!r.ok) throw await failure(key, "conditional put", r);
      await r.body?.cancel();
      return { key, size: new TextEncoder().encode(body).byteLength, etag: (r.headers.get("etag") ?? "").replaceAll('"', ""), metadata: options.metadata ?? {} };
    },
    async get(key, range) {
      const headers: Record<string, string> = range ? { range: `bytes=${range.offset}-${range.offset + range.length - 1}` } : {};
      const r = await aws.fetch(objectUrl(s, key), { headers });
      if (r.status === 404) {
        await r.body?.cancel();
        return null;
      }
      if (!r.ok) throw await failure(key, "get", r);
      return { ...infoFrom(key, r), body: r.body! };
    },
    async head(key) {
      // Checksum mode: the store reports the SHA-256 it keeps (SeaweedFS 4.48 does for a PUT that carried one, and
      // only when asked); a store that keeps none, or ignores the header, answers without it.
      const r = await aws.fetch(objectUrl(s, key), { method: "HEAD", headers: { "x-amz-checksum-mode": "ENABLED" } });
      if (r.status === 404) return null;
      if (!r.ok) throw await failure(key, "head", r);
      return infoFrom(key, r);
    },
    async delete(keys) {
      await Promise.all([keys].flat().map(async (key) => {
        const r = await aws.fetch(objectUrl(s, key), { method: "DELETE" });
        await r.body?.cancel();
        if (!r.ok && r.status !== 404) throw await failure(key, "delete", r);
      }));
    },
    async list(prefix, options = {}) {
      const u = new URL(`${s.endpoint.replace(/\/+$/, "")}/${s.bucket}`);
      u.searchParams.set("list-type", "2");
      u.searchParams.set("prefix", prefix);
      u.searchParams.set("max-keys", String(options.limit ?? 1000));
      if (options.cursor) u.searchParams.set("continuation-token", options.cursor);
      const r = await aws.fetch(u);
      if (!r.ok) throw await failure(prefix, "list", r);
      const parsed = xml.parse(await r.text()).ListBucketResult ?? {};
      const objects = ((parsed.Contents ?? []) as { Key: string; Size: string; LastModified: string }[]).map((c) => ({ key: c.Key, size: Number(c.Size), uploaded: Date.parse(c.LastModified) }));
      return { objects, cursor: parsed.IsTruncated === "true" ? parsed.NextContinuationToken : undefined };
    },
    async createMultipartUpload(key, options = {}) {
      const u = objectUrl(s, key);
      u.searchParams.set("uploads", "");
      const headers = metadataHeaders(options.metadata, options.contentType);
      if (options.partChecksums === "sha256") headers["x-amz-checksum-algorithm"] = "SHA256";
      const r = await aws.fetch(u, { method: "POST", headers });
      if (!r.ok) throw await failure(key, "create multipart upload", r);
      const uploadId = xml.parse(await r.text()).InitiateMultipartUploadResult?.UploadId;
      if (!uploadId) throw new StoreError(key, "create multipart upload returned no UploadId");
      return multipart(key, uploadId);
    },
    resumeMultipartUpload: multipart,
  };
  return store;
}

/**
 * A presigned URL for one key and one method, valid for `expiresSeconds`. Pure crypto, no network. `query`
 * parameters are signed (x-amz-checksum-sha256 there binds the body's hash: the store refuses other bytes);
 * `headers` are signed too, so the request must carry them exactly (If-None-Match: * makes a PUT URL
 * create-only: it cannot overwrite the object once written).
 */
export async function presign(s: S3Settings, key: string, method: "GET" | "PUT", expiresSeconds: number, query: Record<string, string> = {}, headers: Record<string, string> = {}): Promise<string> {
  const u = objectUrl(s, key);
  for (const [k, v] of Object.entries(query)) u.searchParams.set(k, v);
  u.searchParams.set("X-Amz-Expires", String(expiresSeconds));
  const signed = await s3Client(s).sign(u.toString(), { method, headers, aws: { signQuery: true } });
  return signed.url;
}

/** The bucket's open multipart uploads under a prefix (the first 1000), oldest information the store keeps: when each began. */
export async function listMultipartUploads(s: S3Settings, prefix: string): Promise<{ key: string; uploadId: string; initiated: string }[]> {
  const u = new URL(`${s.endpoint.replace(/\/+$/, "")}/${s.bucket}`);
  u.searchParams.set("uploads", "");
  u.searchParams.set("prefix", prefix);
  const r = await s3Client(s).fetch(u);
  if (!r.ok) throw await failure(prefix, "list multipart uploads", r);
  const parsed = xml.parse(await r.text()).ListMultipartUploadsResult ?? {};
  return ((parsed.Upload ?? []) as { Key: string; UploadId: string; Initiated: string }[]).map((x) => ({ key: x.Key, uploadId: x.UploadId, initiated: x.Initiated }));
}

/**
 * The SHA-256 checksum the store keeps for an object, as HeadObject reports it with x-amz-checksum-mode: ENABLED:
 * base64 for a single PUT that carried one, "base64-N" for a multipart upload opened with SHA-256 part checksums
 * (part-checksums.ts). null when the store reports none (an object stored without one, or a store that keeps none).
 */
export async function storedChecksumSha256(s: S3Settings, key: string): Promise<string | null> {
  const r = await s3Client(s).fetch(objectUrl(s, key), { method: "HEAD", headers: { "x-amz-checksum-mode": "ENABLED" } });
  if (!r.ok) throw new StoreError(key, `head (checksum mode) failed: HTTP ${r.status}`, r.status);
  return r.headers.get("x-amz-checksum-sha256");
}
