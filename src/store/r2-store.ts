// ObjectStore over the R2 binding: the Worker's own path to the bucket in production.
import { StoreError, withLength, type MultipartUpload, type ObjectInfo, type ObjectStore } from "./object-store.ts";

/** R2 binding errors become StoreError naming the key, as the contract promises. */
async function guarded<T>(key: string, what: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    if (e instanceof StoreError) throw e;
    throw new StoreError(key, `${what} failed: ${(e as Error).message ?? String(e)}`);
  }
}

/** R2 keeps a SHA-256 only when the put carried one (checksums.sha256, an ArrayBuffer); multipart objects have none. */
function sha256Of(o: R2Object): string | undefined {
  const sum = o.checksums?.sha256;
  return sum ? [...new Uint8Array(sum)].map((b) => b.toString(16).padStart(2, "0")).join("") : undefined;
}

function info(o: R2Object): ObjectInfo {
  const sha256 = sha256Of(o);
  return { key: o.key, size: o.size, etag: o.etag, metadata: o.customMetadata ?? {}, ...(sha256 ? { sha256 } : {}) };
}

function multipart(upload: R2MultipartUpload): MultipartUpload {
  return {
    key: upload.key,
    uploadId: upload.uploadId,
    async uploadPart(partNumber, body) {
      const part = await guarded(upload.key, `upload part ${partNumber}`, () => upload.uploadPart(partNumber, body));
      return { partNumber: part.partNumber, etag: part.etag };
    },
    async complete(parts) {
      // The binding takes no part checksums: completing as if it had checked them would claim a check nobody made.
      if (parts.some((p) => p.sha256)) throw new StoreError(upload.key, "complete multipart upload: the R2 binding cannot check part checksums (complete over the S3 API)", undefined, "permanent");
      // R2 wants the parts in ascending order (as S3 does; s3-store sorts too). Callers collect them in the order
      // uploads finish, which with concurrent uploads is not part order.
      return info(await guarded(upload.key, "complete multipart upload", () => upload.complete([...parts].sort((a, b) => a.partNumber - b.partNumber))));
    },
    abort: () => guarded(upload.key, "abort multipart upload", () => upload.abort()),
  };
}

export function r2Store(bucket: R2Bucket): ObjectStore {
  return {
    kind: "r2",
    async put(key, body, options = {}) {
      let value: ReadableStream<Uint8Array> | string | Uint8Array = body;
      if (body instanceof ReadableStream) {
        if (options.length === undefined) throw new StoreError(key, "a stream put needs its length; use a multipart upload for unknown lengths", undefined, "permanent");
        value = withLength(body, options.length);
      }
      const put = await guarded(key, "put", () => bucket.put(key, value, {
        httpMetadata: options.contentType ? { contentType: options.contentType } : undefined,
        customMetadata: options.metadata,
        // R2 checks the body against it and refuses the put otherwise.
        ...(options.sha256 ? { sha256: options.sha256 } : {}),
      }));
      if (!put) throw new StoreError(key, "put was refused");
      return info(put);
    },
    async putIf(key, body, condition, options = {}) {
      // R2 answers null, not an error, when the condition does not hold.
      const put = await guarded(key, "conditional put", () => bucket.put(key, body, {
        onlyIf: "absent" in condition ? { etagDoesNotMatch: "*" } : { etagMatches: condition.etag },
        httpMetadata: options.contentType ? { contentType: options.contentType } : undefined,
        customMetadata: options.metadata,
      }));
      return put ? info(put) : null;
    },
    async get(key, range) {
      const o = await guarded(key, "get", () => bucket.get(key, range ? { range: { offset: range.offset, length: range.length } } : undefined));
      if (!o) return null;
      // The contract keeps the stored checksum to head() and put() (the S3 store's GET does not ask for it).
      const { sha256: _sha256, ...described } = info(o);
      return { ...described, body: o.body };
    },
    async head(key) {
      const o = await guarded(key, "head", () => bucket.head(key));
      return o ? info(o) : null;
    },
    async delete(keys) {
      await guarded([keys].flat().join(", "), "delete", () => bucket.delete(keys));
    },
    async list(prefix, options = {}) {
      const r = await guarded(prefix, "list", () => bucket.list({ prefix, cursor: options.cursor, limit: options.limit }));
      return { objects: r.objects.map((o) => ({ key: o.key, size: o.size, uploaded: o.uploaded.getTime() })), cursor: r.truncated ? r.cursor : undefined };
    },
    async createMultipartUpload(key, options = {}) {
      if (options.partChecksums) throw new StoreError(key, "create multipart upload: the R2 binding keeps no part checksums (open the upload over the S3 API)", undefined, "permanent");
      return multipart(await guarded(key, "create multipart upload", () => bucket.createMultipartUpload(key, {
        httpMetadata: options.contentType ? { contentType: options.contentType } : undefined,
        customMetadata: options.metadata,
      })));
    },
    resumeMultipartUpload(key, uploadId) {
      return multipart(bucket.resumeMultipartUpload(key, uploadId));
    },
  } satisfies ObjectStore;
}
