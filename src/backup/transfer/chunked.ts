// chunked: the staged image is cut into content-defined chunks (snapflow-lazy chunk in the sandbox), the Worker finds
// which chunks the store lacks or holds wrong under the backup's tenant (chunks/chunk-keys.ts: dedup answers only
// within a tenant) (a HEAD each, the stored checksum compared with the name:
// missing-chunks.ts) and signs a PUT for those only, bound to each chunk's SHA-256 (the store refuses other bytes;
// not create-only, so a chunk found bad is replaced by the right bytes), and the agent uploads them. A second backup of a slightly changed tree, or of a fork, shares
// most chunks with the first and uploads only the others. The snapshot's own object is the index.
import type { SquashfsFormat } from "../../../container/contract/protocol.ts";
import { mapBounded } from "../../chunks/bounded.ts";
import { distinctChunks, readIndex, serializeIndex } from "../../chunks/chunk-index.ts";
import { chunkKey } from "../../chunks/chunk-keys.ts";
import { missingChunks, REHASH_MAX_BYTES } from "../../chunks/missing-chunks.ts";
import { mountFirstOf } from "../../chunks/mount-set.ts";
import { SnapflowError } from "../../errors.ts";
import { DEFAULT_TENANT } from "../../snapshots/tenant.ts";
import { since } from "../../phases/phase-runner.ts";
import { sandboxPaths } from "../../sandbox/sandbox-paths.ts";
import type { BackupStrategy } from "../../strategies/registry.ts";
import type { BackupTransfer } from "./backup-transfer.ts";
import { uploadExpirySeconds } from "./presigned-put.ts";

const PRESIGNS_IN_FLIGHT = 32;

export function chunkedFormat(s: BackupStrategy): SquashfsFormat & { chunks: { avg: number } } {
  if (s.format.kind !== "squashfs" || !s.format.chunks) throw new SnapflowError("bad_request", `${s.name}: the chunked path needs a squashfs format with chunks`, { field: "strategy" });
  return s.format as SquashfsFormat & { chunks: { avg: number } };
}

export const chunkedTransfer: BackupTransfer = {
  streamsArchive: false,
  singlePass: false,
  // The index is the Worker's own, but verify must also find every chunk it names: it reads the index back.
  hashedByWorker: false,
  async transfer({ d, p, s, agent, archived, key, started }) {
    const format = chunkedFormat(s);
    const image = archived.staged!;
    const indexFile = sandboxPaths.chunkIndex(p.snapshotId);
    const { index, ms: indexMs } = await agent.indexChunks({ image, output: indexFile, avg: format.chunks.avg });
    // The helper hashed the image in the same read that cut it: it must be the image the archive step made.
    if (index.sha256 !== archived.sha256 || index.size !== archived.bytes) {
      throw new SnapflowError("transfer_damaged", `the indexed image (${index.size} bytes, sha256 ${index.sha256}) is not the staged image (${archived.bytes} bytes, sha256 ${archived.sha256})`);
    }
    const stored = await serializeIndex(index);
    // The index goes in first: from now on the chunk collector counts its chunks as referenced (chunk-gc.ts), so a
    // chunk found present below is not swept while this backup relies on it.
    await d.store.put(key, stored.text, { contentType: "application/json", sha256: stored.sha256 });
    const findStarted = performance.now();
    const distinct = distinctChunks(index);
    const tenant = p.tenant ?? DEFAULT_TENANT;
    const found = await missingChunks(d.store, tenant, distinct, { rehashBytes: REHASH_MAX_BYTES });
    const missing = found.missing;
    const findMs = since(findStarted);
    const missingBytes = missing.reduce((n, c) => n + c.size, 0);
    const expiresSeconds = uploadExpirySeconds(missingBytes);
    const urls = Object.fromEntries(await mapBounded(missing, PRESIGNS_IN_FLIGHT, async (c) => [c.sha256, await d.presigner.url(chunkKey(tenant, c.sha256), "PUT", { sha256: c.sha256, expiresSeconds })] as const));
    const sent = await agent.uploadChunks({ image, index: indexFile, urls, concurrency: p.tuning?.concurrency ?? 8 });
    if (sent.chunks !== missing.length || sent.bytes !== missingBytes) {
      throw new SnapflowError("transfer_damaged", `the agent uploaded ${sent.chunks} chunks (${sent.bytes} bytes); ${missing.length} (${missingBytes} bytes) were missing`);
    }
    for (const file of [image, indexFile]) await agent.deleteFile(file).catch(() => {});
    const mountFirst = mountFirstOf(index, { headChunks: d.config.LAZY_HEAD_CHUNKS, tailBytes: d.config.LAZY_TAIL_BYTES });
    return {
      ms: since(started), bytes: stored.bytes, sha256: stored.sha256,
      chunks: {
        imageBytes: index.size, imageSha256: index.sha256, avg: index.avgChunk, count: index.chunks.length, distinct: distinct.length,
        uploadedChunks: sent.chunks, uploadedBytes: sent.bytes, indexMs, findMs, uploadMs: sent.ms, uploadRetries: sent.retries,
        // How the reused chunks were checked, and the ones found bad in the store and uploaded again (named).
        replacedBad: found.bad.length, ...(found.bad.length ? { badChunks: found.bad.slice(0, 20) } : {}),
        reusedVerified: found.verified, rehashed: found.rehashed, unverified: found.unverified,
        ...(mountFirst ? { mountFirst } : {}),
      },
    };
  },

  // The index's own bytes were checked like any archive's; every chunk it names must be in the store too, with its
  // size and, where the store keeps one, its checksum. This HEAD of every chunk, reused ones included, comes after
  // the upload and right before the record; it hashes nothing itself (the lookup before the upload did).
  async verifyStored({ d, p, key, sent }) {
    const index = await readIndex(d.store, key, sent.sha256);
    const distinct = distinctChunks(index);
    const { missing, bad, verified, unverified } = await missingChunks(d.store, p.tenant ?? DEFAULT_TENANT, distinct);
    if (missing.length) {
      throw new SnapflowError("transfer_damaged", `${missing.length} of ${distinct.length} chunks are not in the store after the upload (${bad.length} of them hold other bytes than their name), first: ${missing.slice(0, 3).map((c) => c.sha256).join(", ")}`);
    }
    return { chunksChecked: distinct.length, chunksChecksumVerified: verified, chunksSizeOnly: unverified };
  },
};
