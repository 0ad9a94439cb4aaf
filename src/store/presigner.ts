// Presigning is a capability of the store's configuration: the bucket's S3 endpoint and an access key let the
// Worker hand a sandbox short-lived URLs for one key and one method, so archive bytes go straight between the
// sandbox and the store. Built once (deps.ts), whichever ObjectStore the Worker itself uses — with R2 the
// binding and the S3 endpoint address the same bucket.
import { SnapflowError } from "../errors.ts";
import type { MultipartUpload } from "./object-store.ts";
import { presignGets } from "./presign-many.ts";
import { hexToBase64, listMultipartUploads, presign, s3Store, storedChecksumSha256, type S3Settings } from "./s3-store.ts";

export interface Presigner {
  /**
   * A URL for `method` on `key` only, valid for the configured expiry (or `expiresSeconds`). Pure crypto.
   * PUT only: `sha256` (hex) binds the body (the store refuses other bytes); `createOnly` signs If-None-Match: *,
   * so the URL cannot overwrite the object once it exists (the agent must send that header).
   */
  url(key: string, method: "GET" | "PUT", options?: { expiresSeconds?: number; query?: Record<string, string>; sha256?: string; createOnly?: boolean }): Promise<string>;
  /** GET URLs for many keys, in their order, signed at once (presign-many.ts): thousands in tens of milliseconds. */
  gets(keys: readonly string[], expiresSeconds?: number): string[];
  /**
   * A multipart upload opened over the S3 API, whose part URLs this presigner signs (partUrl). R2's binding
   * cannot open one that presigned part URLs may address. Opened with SHA-256 part checksums: complete() must give
   * each part's sha256, and the store refuses the completion if a part it holds has another.
   */
  createMultipartUpload(key: string): Promise<MultipartUpload>;
  /** The URL the sandbox PUTs part `partNumber` of `upload` to. */
  partUrl(upload: MultipartUpload, partNumber: number, expiresSeconds?: number): Promise<string>;
  /**
   * The bucket's open multipart uploads under `prefix` (S3 ListMultipartUploads; R2's binding cannot list them), for
   * the sweeper: an upload nobody recorded is still found. The first 1000; a sweep that finds more runs again.
   */
  listUploads(prefix: string): Promise<{ key: string; uploadId: string; initiated: string }[]>;
  /**
   * The SHA-256 checksum the store itself keeps for `key` (HeadObject in checksum mode over the S3 API): "base64-N"
   * for an upload this presigner opened, null when the store reports none.
   */
  storedChecksum(key: string): Promise<string | null>;
  /** A handle on an open upload, to abort it (no request is made). */
  resumeMultipartUpload(key: string, uploadId: string): MultipartUpload;
}

/**
 * Refuses to sign a write that is not bound to its bytes: every single PUT carries the SHA-256 its body must have
 * (the store refuses other bytes), exactly 64 lowercase hex, since the hash comes from a sandbox. A multipart part
 * (partNumber in the query) is bound at completion instead: the upload was opened with SHA-256 part checksums.
 */
function checkBinding(key: string, method: "GET" | "PUT", options: { query?: Record<string, string>; sha256?: string }): void {
  if (options.sha256 !== undefined && !/^[0-9a-f]{64}$/.test(options.sha256)) {
    throw new SnapflowError("unbound_write", `refusing to sign ${method} ${key}: its SHA-256 ${JSON.stringify(options.sha256.slice(0, 80))} is not 64 lowercase hex characters`);
  }
  if (method === "PUT" && options.sha256 === undefined && !options.query?.partNumber) {
    throw new SnapflowError("unbound_write", `refusing to sign PUT ${key} without the SHA-256 its bytes must have`);
  }
}

export function s3Presigner(s: S3Settings, defaultExpirySeconds: number): Presigner {
  const store = s3Store(s);
  const url: Presigner["url"] = async (key, method, options = {}) => {
    checkBinding(key, method, options);
    return presign(s, key, method, Math.min(options.expiresSeconds ?? defaultExpirySeconds, defaultExpirySeconds), {
      ...options.query,
      ...(options.sha256 ? { "x-amz-checksum-sha256": hexToBase64(options.sha256) } : {}),
    }, options.createOnly ? { "if-none-match": "*" } : {});
  };
  return {
    url,
    gets: (keys, expiresSeconds) => presignGets(s, keys, Math.min(expiresSeconds ?? defaultExpirySeconds, defaultExpirySeconds)),
    createMultipartUpload: (key) => store.createMultipartUpload(key, { partChecksums: "sha256" }),
    partUrl: (upload, partNumber, expiresSeconds) => url(upload.key, "PUT", { expiresSeconds, query: { partNumber: String(partNumber), uploadId: upload.uploadId } }),
    listUploads: (prefix) => listMultipartUploads(s, prefix),
    storedChecksum: (key) => storedChecksumSha256(s, key),
    resumeMultipartUpload: (key, uploadId) => store.resumeMultipartUpload(key, uploadId),
  };
}
