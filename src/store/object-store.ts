// The object-store contract. Two implementations run the same conformance suite (test/workers/object-store-conformance-integration.test.ts):
// the R2 binding (production) and S3 over aws4fetch (R2's S3 endpoint in production, a local S3 server here).
//
// Rules every implementation keeps:
// - put of a stream needs its exact length up front (R2 refuses unknown lengths); an unknown-length stream goes
//   through multipart-upload.ts instead.
// - get returns null for a missing key; every other failure throws StoreError with the key.
// - delete of a missing key is not an error, so cleanup can be retried.
// - multipart parts are raw bytes; the equal-size rule is enforced by multipart-upload.ts, not here, because
//   no local server enforces it and R2 does.

export interface PutOptions {
  /** required when body is a stream */
  length?: number;
  contentType?: string;
  metadata?: Record<string, string>;
}

export interface ObjectInfo {
  key: string;
  size: number;
  etag: string;
  metadata: Record<string, string>;
}

export interface StoredObject extends ObjectInfo {
  body: ReadableStream<Uint8Array>;
}

export interface ByteRange {
  offset: number;
  length: number;
}

export interface UploadedPart {
  partNumber: number;
  etag: string;
}

export interface MultipartUpload {
  readonly key: string;
  readonly uploadId: string;
  uploadPart(partNumber: number, body: Uint8Array): Promise<UploadedPart>;
  complete(parts: UploadedPart[]): Promise<ObjectInfo>;
  abort(): Promise<void>;
}

export interface ObjectStore {
  readonly kind: "r2" | "s3";
  put(key: string, body: ReadableStream<Uint8Array> | string | Uint8Array, options?: PutOptions): Promise<ObjectInfo>;
  get(key: string, range?: ByteRange): Promise<StoredObject | null>;
  head(key: string): Promise<ObjectInfo | null>;
  delete(keys: string | string[]): Promise<void>;
  list(prefix: string, options?: { cursor?: string; limit?: number }): Promise<{ objects: { key: string; size: number }[]; cursor?: string }>;
  createMultipartUpload(key: string, options?: Omit<PutOptions, "length">): Promise<MultipartUpload>;
  resumeMultipartUpload(key: string, uploadId: string): MultipartUpload;
}

export class StoreError extends Error {
  readonly key: string;
  readonly status: number | undefined;
  constructor(key: string, message: string, status?: number) {
    super(`object store: ${key}: ${message}`);
    this.key = key;
    this.status = status;
  }
}

/** Wraps a stream of known length so that R2.put and fetch send a Content-Length instead of chunking. */
export function withLength(body: ReadableStream<Uint8Array>, length: number): ReadableStream<Uint8Array> {
  return body.pipeThrough(new FixedLengthStream(length));
}
