// The object-store contract. Two implementations run the same conformance suite (test/workers/object-store-conformance-integration.test.ts):
// the R2 binding (production) and S3 over aws4fetch (R2's S3 endpoint in production, a local S3 server here).
//
// Rules every implementation keeps:
// - put of a stream needs its exact length up front (R2 refuses unknown lengths); an unknown-length stream goes
//   through multipart-upload.ts instead.
// - get/head return null for a missing key; every other failure throws StoreError with the key and its kind
//   (transient: try again; permanent: the request itself is wrong; not_found).
// - delete of a missing key is not an error, so cleanup can be retried.
// - multipart parts are raw bytes; the equal-size rule is enforced by multipart-upload.ts, not here, because
//   no local server enforces it and R2 does.
// Retries: no implementation retries on its own (a streamed body cannot be replayed); callers retry whole
// operations (a Workflow step). Each method's doc says whether repeating it is safe.

export interface PutOptions {
  /** required when body is a stream */
  length?: number;
  contentType?: string;
  metadata?: Record<string, string>;
  /**
   * SHA-256 (hex) the bytes must have: the store itself refuses a body that does not match (R2's put `sha256`,
   * S3's x-amz-checksum-sha256), so what is stored is what the hash the record keeps describes.
   */
  sha256?: string;
}

export interface ObjectInfo {
  key: string;
  size: number;
  etag: string;
  metadata: Record<string, string>;
  /**
   * The whole object's SHA-256 (hex) as the store keeps it, where it keeps one: the hash a put carried (and the
   * store checked the body against), read back by head() and put(). Absent when the write carried none (an
   * overwrite without one drops it), for multipart objects (S3's checksum there is a composite of the parts, not
   * the object's hash), and from get(). Dedup reads it before it reuses a chunk (chunks/missing-chunks.ts).
   */
  sha256?: string;
}

export interface StoredObject extends ObjectInfo {
  body: ReadableStream<Uint8Array>;
}

export interface ListedObject {
  key: string;
  size: number;
  uploaded: number;
}

export interface ByteRange {
  offset: number;
  length: number;
}

export interface UploadedPart {
  partNumber: number;
  etag: string;
  /**
   * SHA-256 (hex) the part must have, for an upload opened with `partChecksums: "sha256"`: complete() lists it and
   * the store refuses the completion (BadDigest) if the part it holds has another hash. Only the S3 API does this.
   */
  sha256?: string;
}

export interface MultipartOptions extends Omit<PutOptions, "length"> {
  /**
   * "sha256": the store keeps each part's SHA-256 (x-amz-checksum-algorithm: SHA256), checks the ones complete()
   * is given, and reports the composite (part-checksums.ts). S3 API only: the R2 binding refuses the option.
   */
  partChecksums?: "sha256";
}

export interface MultipartUpload {
  readonly key: string;
  readonly uploadId: string;
  /** Safe to repeat with the same number and bytes: the later upload replaces the earlier (use its etag). */
  uploadPart(partNumber: number, body: Uint8Array): Promise<UploadedPart>;
  /**
   * Makes the object from the parts. Not safe to blindly repeat: after a success the upload id is gone and a
   * second call fails; a caller that lost the answer checks with head(key) instead.
   */
  complete(parts: UploadedPart[]): Promise<ObjectInfo>;
  /** Drops the parts. Safe to repeat, and to call on an upload that no longer exists. */
  abort(): Promise<void>;
}

export interface ObjectStore {
  readonly kind: "r2" | "s3";
  /** Whole-object write; repeating it with the same bytes gives the same object (last writer wins). */
  put(key: string, body: ReadableStream<Uint8Array> | string | Uint8Array, options?: PutOptions): Promise<ObjectInfo>;
  /**
   * A small write that happens only if the key is absent (`{absent: true}`) or still holds the object whose etag
   * is given: null when it did not happen. The compare-and-swap that leases are built on (target-leases.ts).
   */
  putIf(key: string, body: string, condition: { absent: true } | { etag: string }, options?: Omit<PutOptions, "length" | "sha256">): Promise<ObjectInfo | null>;
  /** null when the key is missing. Safe to repeat. */
  get(key: string, range?: ByteRange): Promise<StoredObject | null>;
  /** null when the key is missing. Safe to repeat. */
  head(key: string): Promise<ObjectInfo | null>;
  /** Missing keys are not an error, so cleanup can be repeated. */
  delete(keys: string | string[]): Promise<void>;
  /**
   * One page of keys under a prefix, in key order, with when each was last written (ms since the epoch; S3 gives
   * whole seconds): the chunk collector spares what is younger than its grace period. Safe to repeat.
   */
  list(prefix: string, options?: { cursor?: string; limit?: number }): Promise<{ objects: ListedObject[]; cursor?: string }>;
  /** Each call opens a new upload: record its id (or abort it) so that a failure leaves nothing open. */
  createMultipartUpload(key: string, options?: MultipartOptions): Promise<MultipartUpload>;
  /** A handle on an upload opened earlier (by another step or attempt); no request is made. */
  resumeMultipartUpload(key: string, uploadId: string): MultipartUpload;
}

/** transient: a retry may succeed; permanent: the request is wrong and will fail again; not_found: no such key. */
export type StoreErrorKind = "transient" | "permanent" | "not_found";

/** The kind of an HTTP status from a store: throttling and server errors are transient, other 4xx permanent. */
export function storeErrorKind(status: number | undefined): StoreErrorKind {
  if (status === undefined || status >= 500 || status === 408 || status === 429) return "transient";
  return status === 404 ? "not_found" : "permanent";
}

export class StoreError extends Error {
  readonly key: string;
  readonly status: number | undefined;
  readonly kind: StoreErrorKind;
  constructor(key: string, message: string, status?: number, kind: StoreErrorKind = storeErrorKind(status)) {
    super(`object store: ${key}: ${message}`);
    this.key = key;
    this.status = status;
    this.kind = kind;
  }
}

/** Wraps a stream of known length so that R2.put and fetch send a Content-Length instead of chunking. */
export function withLength(body: ReadableStream<Uint8Array>, length: number): ReadableStream<Uint8Array> {
  return body.pipeThrough(new FixedLengthStream(length));
}
