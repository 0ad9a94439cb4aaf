// presigned-multipart: the sandbox PUTs the archive's parts in parallel to presigned part URLs; the Worker only opens
// the upload (over the S3 API, which the URLs address), signs URLs and completes or aborts. No archive byte crosses
// the Worker. The default backup takes this path (registry.ts DEFAULT_BACKUP), and so does its incremental
// (tar-zst-delta): the sandbox's pass is then a delta against the base's manifest, kept there or the store's.
//
// Who cuts the parts: the native engine itself (`snapflow-lazy pack --part-size`, container/transfer/engine-parts.ts)
// when it can make the pass, so no byte crosses the agent either; else the agent cuts its own single pass's stream
// (container/transfer/presigned-multipart.ts). The step reports which (`uploadedBy`).
//
// How many URLs (part-urls.ts sendInParts, shared with the file-level pack): all are signed up front (the sandbox
// cannot ask the Worker for more mid-stream), so this step first asks the sandbox for a bound on the tar archive (POST /v1/tree-size: a metadata pass, ~0.1 s natively for 31.7k
// entries; container/transfer/tree-size.ts) — a delta takes its base's totals instead, no walk — and signs URLs for it, plus one spare part for a tree that grows a little
// meanwhile. zstd only shrinks tar, so the archive fits unless the tree grew by more than a part: then the sandbox
// stops before sending the extra part and answers 400 naming `urls`, this step aborts that upload, counts again and
// signs twice as many (or the new bound's, if larger) for one more attempt; a second overflow fails the run naming
// urls. A tree that only shrank wastes nothing but unsigned-for-use URLs. (Before, the archive phase took a whole
// hashing walk only to size this.)
//
// Each URL's expiry is fitted to when it will be used: part n cannot start before n - 1 parts have been cut from the
// stream, so its URL lives 60 s plus those bytes at a slow 2 MB/s of archive output (partUrlExpirySeconds), never
// longer than PRESIGN_EXPIRY_SECONDS (the presigner's cap). A leaked early URL is useless within a minute or so; a
// late one lives as long as the stream plausibly needs to reach it. When the stream is slower than that (or the
// upload outlasts the cap), the store answers 403 "Request has expired" to the late part: the sandbox reports it as
// `url_expired` (502), this step aborts the upload, and the step's retry signs fresh URLs for a new upload.
//
// One walk: the archive and its manifest come from one pass in the sandbox (the engine's, or the agent's), with
// tar's entries named by the sorted walk, as on every other tar path; the manifest recorded is that pass's.
//
// Integrity: the upload is opened with SHA-256 part checksums, the sandbox reports each part's SHA-256 (hashed from
// its buffer before the PUT), and the completion lists them, so the store itself refuses an object whose parts are
// not the ones reported (BadDigest: permanent, the run stops, the upload is aborted). The composite of the
// reported hashes is what the store must then keep for the object: verify reads it back (backup-phases.ts).
import type { UploadMultipartResult } from "../../../container/contract/protocol.ts";
import { SnapflowError } from "../../errors.ts";
import { since } from "../../phases/phase-runner.ts";
import { sandboxPaths } from "../../sandbox/sandbox-paths.ts";
import { baseManifestSource, storeSinglePassManifest } from "../single-pass.ts";
import type { BackupTransfer } from "./backup-transfer.ts";
import { boundFrom, sendInParts } from "./part-urls.ts";
import { tarOnly } from "./tar-only.ts";

export { partUrlExpirySeconds, urlCountFor } from "./part-urls.ts";

export const presignedMultipartTransfer: BackupTransfer = {
  streamsArchive: true,
  singlePass: true,
  hashedByWorker: false,
  async transfer({ d, p, s, agent, key, started }) {
    const format = tarOnly(s);
    // A delta (tar-zst-delta): its base's manifest, and its tree's totals, which bound the delta's archive without a
    // walk (it holds at most the whole tree: the URLs are signed for that, and are cheap; the sandbox uses two or so).
    // The upload is opened meanwhile (a store round trip); should the sizing fail, it is aborted here (and by the
    // step's cleanup otherwise: withUploadRecords records it).
    const opened = d.presigner.createMultipartUpload(key);
    const sized = (async () => {
      const base = await baseManifestSource(d, p);
      return { base, first: base ? { ...boundFrom(base.totals), ms: 0, by: "base" as const } : await agent.treeSize(p.path) };
    })();
    const [{ base, first }] = await Promise.all([sized, opened]).catch(async (e) => {
      await opened.then((u) => u.abort(), () => {}).catch(() => {});
      throw e;
    });
    const sizing = { sizeMs: first.ms, sizeBy: first.by, tarMax: first.tarMax };
    const manifestOut = sandboxPaths.manifestOut(p.snapshotId);
    const delta = base ? { base: base.source, ...(base.layerOver ? { layerOver: base.layerOver } : {}), ...(base.baseKept ? { baseKept: base.baseKept } : {}) } : {};
    const source = { archive: { path: p.path, format, manifestOut, keepAs: p.snapshotId, ...delta } };
    // The manifest, too, goes from the sandbox to the store without the Worker (bound to its SHA-256), while the
    // upload is completed (alongside): the npm workspace's 9.9 MB took 118-135 ms after the completion before.
    let made: Awaited<ReturnType<typeof storeSinglePassManifest>> | undefined;
    let answeredAt = 0;
    const storeManifest = async (up: UploadMultipartResult) => {
      made = await storeSinglePassManifest(d, p, agent, { bytes: up.bytes, sha256: up.sha256, ms: up.ms, manifest: up.manifest!, ...(up.delta ? { delta: up.delta } : {}) }, { bySandbox: true });
    };
    const { sent: up, urls, attempts, storeChecksum } = await sendInParts(d, p, key, first, () => agent.treeSize(p.path), async (urls, partSize, tarMax) => {
      const up = await agent.uploadMultipart({ source, partSize, concurrency: p.tuning?.concurrency ?? 4, urls }, tarMax);
      if (!up.manifest) throw new SnapflowError("agent_error", `the agent in sandbox ${p.sandboxId} uploaded the archive without the manifest of what it archived (an agent older than this Worker?)`);
      answeredAt = since(started);
      return up;
    }, { opened, alongside: storeManifest });
    const by = { ...(up.uploadedBy ? { uploadedBy: up.uploadedBy } : {}), ...(up.engine ? { engine: up.engine } : {}) };
    // answeredMs: the step's start → the sandbox's answer (the pass and its parts PUT); the rest is the completion
    // and the manifest's PUT, together.
    return { ms: since(started), bytes: up.bytes, sha256: up.sha256, parts: up.parts.length, urls, attempts, storeChecksum, agentPeakBufferedBytes: up.peakBufferedBytes, ...sizing, answeredMs: answeredAt, ...by, ...made! };
  },
};
