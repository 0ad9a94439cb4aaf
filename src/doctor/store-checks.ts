// The store behaviours snapflow relies on, checked where they happen: the Worker signs (its presigner, its store
// binding) and the sandbox's agent PUTs to the URLs, as every presigned backup does. Each check names what snapflow
// does when the store lacks the behaviour (docs/security.md, "What the stores enforce").
//
//   one bucket      an object the binding wrote is what a presigned GET serves (S3_ENDPOINT/S3_BUCKET = the binding's)
//   bound PUT       a PUT signed with x-amz-checksum-sha256 is accepted with the bytes it names
//   wrong bytes     ... and refused, for its checksum (BadDigest), with other bytes
//   empty/malformed a URL signed with an empty or malformed checksum parameter writes nothing
//   create-only     a PUT signed with If-None-Match: * is refused (412) once the object exists
//   part checksums  a multipart upload opened with SHA-256 part checksums completes with the parts' hashes ...
//   wrong part      ... and refuses a completion that names a wrong one
//   composite       HeadObject in checksum mode reports the composite of the part hashes
//
// Everything is written under doctor/<id>/ and in the sandbox's /tmp; cleanStore removes the keys and aborts
// the uploads, and says what it could not.
import { presign } from "../store/s3-store.ts";
import { compositeSha256 } from "../store/part-checksums.ts";
import type { MultipartUpload } from "../store/object-store.ts";
import type { Deps } from "../deps.ts";
import type { AgentClient } from "../sandbox/agent-client.ts";
import { blocked, runCheck, type DoctorCheck } from "./doctor-check.ts";

export const STORE_CHECKS = {
  oneBucket: "store: the binding and the S3 endpoint are one bucket",
  boundPut: "store: accepts a presigned PUT bound to its SHA-256",
  wrongBytes: "store: refuses bytes other than the signed SHA-256",
  emptyChecksum: "store: refuses an empty checksum parameter",
  malformedChecksum: "store: refuses a malformed checksum parameter",
  createOnly: "store: refuses a second create-only PUT",
  partChecksums: "store: completes a multipart upload with its part SHA-256s",
  wrongPart: "store: refuses a completion naming a wrong part SHA-256",
  composite: "store: reports the composite checksum on HEAD",
  rangedGet: "store: serves byte ranges of a presigned GET",
} as const;

const IF_MISSING: Record<keyof typeof STORE_CHECKS, string> = {
  oneBucket: "every presigned path writes where the Worker does not read (or is refused): set S3_ENDPOINT and S3_BUCKET to the bucket the SNAPSHOTS binding names",
  boundPut: "presigned-put, chunked and overlay-delta backups fail at their upload (every single PUT URL carries its SHA-256); the Worker's own paths (stream, multipart) still work",
  wrongBytes: "a single PUT is not bound to its bytes at the store: backup verify still hashes the stored object in the Worker (up to 512 MiB) or has the agent read it back, so wrong bytes fail the backup after the upload instead of at it",
  emptyChecksum: "the presigner never signs an empty checksum (it refuses to: unbound_write), so only a URL signed elsewhere could use this; verify's read-back still catches wrong bytes",
  malformedChecksum: "the presigner signs only 64-hex SHA-256s (unbound_write otherwise), so only a URL signed elsewhere could use this; verify's read-back still catches wrong bytes",
  createOnly: "a presigned PUT could overwrite an object that exists (a retried upload replacing a verified archive with other bytes bound to the same SHA-256 is harmless; a leaked URL replaying is not refused)",
  partChecksums: "presigned-multipart backups fail at completion with the store's error, never silently unchecked; use a Worker path (multipart) or presigned-put",
  wrongPart: "part hashes are not checked by the store: above 512 MiB a presigned multipart archive's content is then the sandbox's word (the restore still checks the whole SHA-256)",
  composite: "verify reads the object back instead (the Worker up to 512 MiB, the agent above), one more read of every byte",
  rangedGet: "files-extract restores (chunks are Range GETs of their pack), files-mount and the presigned-ranged restores fail; the other restores read whole objects",
};

/**
 * What an operator does about each, where the cause is usually the deployment, not snapflow: R2 has every one of
 * these behaviours, so a failure there most often means S3_ENDPOINT is not the store itself, or that a proxy or CDN
 * between them drops a parameter or a header.
 */
const NOT_THE_STORE = "check that S3_ENDPOINT is the store itself (R2: https://<account>.r2.cloudflarestorage.com) and that no proxy or CDN in front of it";
const FIX: Record<keyof typeof STORE_CHECKS, string> = {
  oneBucket: "set S3_ENDPOINT and S3_BUCKET to the bucket the SNAPSHOTS binding names (npx wrangler deploy after changing them)",
  boundPut: `${NOT_THE_STORE} drops the x-amz-checksum-sha256 query parameter (a signed parameter dropped also fails the signature)`,
  wrongBytes: `use a store that checks x-amz-checksum-sha256 on PUT (R2 does); ${NOT_THE_STORE} rewrites the request`,
  emptyChecksum: "nothing to do for snapflow (its presigner refuses such URLs); a store that refuses them is safer for URLs signed elsewhere",
  malformedChecksum: "nothing to do for snapflow (its presigner refuses such URLs); a store that refuses them is safer for URLs signed elsewhere",
  createOnly: `use a store that honours If-None-Match: * on PUT (R2 does); ${NOT_THE_STORE} drops the If-None-Match header`,
  partChecksums: `use a store that takes SHA-256 part checksums on multipart uploads (R2 does); ${NOT_THE_STORE} drops the x-amz-checksum-* parameters or headers`,
  wrongPart: "use a store that checks part checksums at completion (R2 does)",
  composite: `${NOT_THE_STORE} drops the x-amz-checksum-sha256 response header of HeadObject (x-amz-checksum-mode: ENABLED)`,
  rangedGet: `${NOT_THE_STORE} drops the Range header or answers 200 with the whole object`,
};

/**
 * Refusing URLs signed with an empty or malformed checksum guards what the presigner already refuses to sign
 * (checkBinding: unbound_write): snapflow does not rely on the store for it, so a store that accepts them (SeaweedFS
 * 4.48 writes the object under an empty one, unchecked) is a warning.
 */
const ADVISORY = new Set<keyof typeof STORE_CHECKS>(["emptyChecksum", "malformedChecksum"]);

const MiB = 1024 * 1024;
/** A 2-part upload: R2's smallest part, then a short last one. */
const PART = 5 * MiB;

function randomBytes(n: number): Uint8Array {
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i += 65536) crypto.getRandomValues(out.subarray(i, Math.min(n, i + 65536)));
  return out;
}

async function sha256Hex(bytes: Uint8Array): Promise<string> {
  return [...new Uint8Array(await crypto.subtle.digest("SHA-256", bytes))].map((b) => b.toString(16).padStart(2, "0")).join("");
}

const streamOf = (bytes: Uint8Array) => new ReadableStream<Uint8Array>({ start(c) { c.enqueue(bytes); c.close(); } });

/** How the store refused an upload, from the agent's message (it quotes the store's status and S3 code). */
function refusal(e: unknown): { refused: boolean; byChecksum: boolean; precondition: boolean; text: string } {
  const text = e instanceof Error ? e.message : String(e);
  return {
    refused: /HTTP 4\d\d|store_refused|answered 4\d\d/.test(text) || (typeof (e as { status?: unknown }).status === "number" && (e as { status: number }).status < 500),
    byChecksum: /BadDigest|InvalidDigest|XAmzContentChecksumMismatch|checksum/i.test(text) && !/SignatureDoesNotMatch/.test(text),
    precondition: /412|PreconditionFailed/.test(text),
    text,
  };
}

export interface StoreCheckContext {
  d: Deps;
  agent: AgentClient;
  /** doctor/<id>/: every key this run writes */
  prefix: string;
  /** a directory in the sandbox for the files the agent PUTs */
  dir: string;
}

export async function storeChecks({ d, agent, prefix, dir }: StoreCheckContext, uploads: MultipartUpload[]): Promise<DoctorCheck[]> {
  const out: DoctorCheck[] = [];
  const a = randomBytes(4096), b = randomBytes(4096), big = randomBytes(PART + MiB);
  const [shaA, shaB] = [await sha256Hex(a), await sha256Hex(b)];
  const files = { a: `${dir}/a.bin`, b: `${dir}/b.bin`, big: `${dir}/big.bin` };
  await agent.writeFile(files.a, streamOf(a));
  await agent.writeFile(files.b, streamOf(b));
  await agent.writeFile(files.big, streamOf(big));
  const c = d.config;
  const s3 = { endpoint: c.S3_ENDPOINT, bucket: c.S3_BUCKET, region: c.S3_REGION, accessKeyId: c.S3_ACCESS_KEY_ID, secretAccessKey: c.S3_SECRET_ACCESS_KEY };
  const check = (name: keyof typeof STORE_CHECKS, fn: Parameters<typeof runCheck>[2]) => runCheck(STORE_CHECKS[name], IF_MISSING[name], fn, { advisory: ADVISORY.has(name), fix: FIX[name] }).then((r) => (out.push(r), r));

  await check("oneBucket", async () => {
    const key = `${prefix}one-bucket`;
    await d.store.put(key, a, { sha256: shaA });
    const got = await agent.hashUrl(await d.presigner.url(key, "GET"));
    return got.sha256 === shaA
      ? { ok: true, detail: `written by the ${d.store.kind} store, read back over a presigned GET from ${new URL(c.S3_ENDPOINT).host}/${c.S3_BUCKET} by the sandbox` }
      : { ok: false, detail: `the presigned GET served ${got.bytes} bytes sha256 ${got.sha256}, not the ${a.byteLength} the binding wrote` };
  });

  const bound = await check("boundPut", async () => {
    const key = `${prefix}bound`;
    const sent = await agent.uploadToUrl({ path: files.a, url: await d.presigner.url(key, "PUT", { sha256: shaA }) });
    const head = await d.store.head(key);
    return head?.size === a.byteLength && sent.sha256 === shaA
      ? { ok: true, detail: `${a.byteLength} bytes accepted with x-amz-checksum-sha256 signed into the URL` }
      : { ok: false, detail: `the PUT answered but the store holds ${head ? `${head.size} bytes` : "nothing"} at the key` };
  });

  await check("wrongBytes", async () => {
    const key = `${prefix}wrong-bytes`;
    try {
      await agent.uploadToUrl({ path: files.b, url: await d.presigner.url(key, "PUT", { sha256: shaA }) });
    } catch (e) {
      const r = refusal(e);
      if (r.refused && r.byChecksum && !(await d.store.head(key))) return { ok: true, detail: `refused: ${r.text}` };
      return { ok: false, detail: r.refused ? `refused, but not for its checksum: ${r.text}` : `failed, not refused by the store: ${r.text}` };
    }
    return { ok: false, detail: "the store accepted 4096 bytes whose SHA-256 is not the one signed into the URL" };
  });

  for (const [name, value] of [["emptyChecksum", ""], ["malformedChecksum", "not-a-sha256"]] as const) {
    await check(name, async () => {
      const key = `${prefix}${name}`;
      // Signed here, bypassing the presigner's own refusal (checkBinding): the question is what the store does.
      const url = await presign(s3, key, "PUT", 60, { "x-amz-checksum-sha256": value });
      try {
        await agent.uploadToUrl({ path: files.a, url });
      } catch (e) {
        const r = refusal(e);
        if (r.refused && !(await d.store.head(key))) return { ok: true, detail: `refused: ${r.text}` };
        return { ok: false, detail: `failed, not refused by the store: ${r.text}` };
      }
      return { ok: false, detail: `the store wrote the object under a URL signed with x-amz-checksum-sha256=${JSON.stringify(value)}` };
    });
  }

  if (!bound.ok) out.push(blocked(STORE_CHECKS.createOnly, IF_MISSING.createOnly, STORE_CHECKS.boundPut, FIX.createOnly));
  else await check("createOnly", async () => {
    const key = `${prefix}create-only`;
    const url = await d.presigner.url(key, "PUT", { sha256: shaA, createOnly: true });
    await agent.uploadToUrl({ path: files.a, url, createOnly: true });
    try {
      await agent.uploadToUrl({ path: files.a, url, createOnly: true });
    } catch (e) {
      const r = refusal(e);
      return r.precondition ? { ok: true, detail: `the first PUT created it; the second was refused: ${r.text}` } : { ok: false, detail: `the second PUT failed, but not as a failed precondition: ${r.text}` };
    }
    return { ok: false, detail: "a second PUT with If-None-Match: * overwrote the object" };
  });

  let parts: { partNumber: number; etag: string; sha256: string }[] | undefined;
  const completed = await check("partChecksums", async () => {
    const key = `${prefix}multipart`;
    const upload = await d.presigner.createMultipartUpload(key);
    uploads.push(upload);
    const urls = await Promise.all([1, 2].map((n) => d.presigner.partUrl(upload, n)));
    const up = await agent.uploadMultipart({ source: { file: files.big }, partSize: PART, concurrency: 1, urls, retries: 0 }, big.byteLength);
    parts = up.parts.map(({ partNumber, etag, sha256 }) => ({ partNumber, etag, sha256 }));
    await upload.complete(parts);
    const head = await d.store.head(key);
    return head?.size === big.byteLength
      ? { ok: true, detail: `${parts.length} parts (${parts.map((p) => p.partNumber === 1 ? "5 MiB" : "1 MiB").join(" + ")}) PUT by the sandbox, completed with their SHA-256s` }
      : { ok: false, detail: `completed, but the store holds ${head ? `${head.size} bytes` : "nothing"}` };
  });

  await check("wrongPart", async () => {
    const key = `${prefix}multipart-wrong`;
    const upload = await d.presigner.createMultipartUpload(key);
    uploads.push(upload);
    const up = await agent.uploadMultipart({ source: { file: files.a }, partSize: PART, concurrency: 1, urls: [await d.presigner.partUrl(upload, 1)], retries: 0 }, a.byteLength);
    try {
      await upload.complete(up.parts.map(({ partNumber, etag }) => ({ partNumber, etag, sha256: shaB })));
    } catch (e) {
      const text = e instanceof Error ? e.message : String(e);
      return (await d.store.head(key)) ? { ok: false, detail: `refused (${text}), yet the object exists` } : { ok: true, detail: `refused: ${text}` };
    }
    return { ok: false, detail: "the store completed the upload with a part SHA-256 that is not its part's" };
  });

  // The file-level restore reads each chunk as a byte range of its pack: the sandbox reads the 6 MiB object in 1 MiB
  // ranges (each answer must be a 206 whose Content-Range names the object's size) and hashes what it assembled.
  await check("rangedGet", async () => {
    const key = `${prefix}ranged`;
    await d.store.put(key, big, { sha256: await sha256Hex(big) });
    const got = await agent.downloadRanged({ url: await d.presigner.url(key, "GET"), size: big.byteLength, output: `${dir}/ranged.bin`, rangeSize: MiB, concurrency: 2, retries: 0 }, big.byteLength);
    const want = await sha256Hex(big);
    return got.sha256 === want && got.bytes === big.byteLength
      ? { ok: true, detail: `${got.ranges ?? "several"} Range GETs of 1 MiB assembled the ${big.byteLength}-byte object, SHA-256 equal` }
      : { ok: false, detail: `the ranges assembled ${got.bytes} bytes sha256 ${got.sha256}, not the object's ${want}` };
  });

  if (!completed.ok || !parts) out.push(blocked(STORE_CHECKS.composite, IF_MISSING.composite, STORE_CHECKS.partChecksums, FIX.composite));
  else {
    const expected = await compositeSha256(parts.map((p) => p.sha256));
    await check("composite", async () => {
      const kept = await d.presigner.storedChecksum(`${prefix}multipart`);
      if (kept === expected) return { ok: true, detail: `HeadObject (checksum mode) reports ${kept}, the composite of the parts' SHA-256s` };
      return { ok: false, detail: kept === null ? "HeadObject in checksum mode reports no SHA-256" : `HeadObject reports ${kept}; the parts make ${expected}` };
    });
  }
  return out;
}

/** Removes every key under the prefix and aborts the uploads; answers what is left (empty when all is clean). */
export async function cleanStore(d: Deps, prefix: string, uploads: MultipartUpload[]): Promise<string[]> {
  for (const u of uploads) await u.abort().catch(() => {});
  const left: string[] = [];
  for (let cursor: string | undefined, first = true; first || cursor; first = false) {
    const page = await d.store.list(prefix, { cursor });
    await d.store.delete(page.objects.map((o) => o.key));
    cursor = page.cursor;
  }
  left.push(...(await d.store.list(prefix)).objects.map((o) => o.key));
  left.push(...(await d.presigner.listUploads(prefix)).map((u) => `${u.key} (open upload ${u.uploadId})`));
  return left;
}
