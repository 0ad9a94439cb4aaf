// multipart: the agent streams the archive as its response while tar runs; the Worker cuts it into equal parts
// and uploads them (bounded memory: (concurrency + 1) × part size), completing or aborting the upload. The relay
// reads the archive in 256 KiB blocks end to end (the deadline's wrapper, the digest, the cutter): store/block-reader.ts.
import { since } from "../../phases/phase-runner.ts";
import { sandboxPaths } from "../../sandbox/sandbox-paths.ts";
import { uploadStreamMultipart } from "../../store/multipart-upload.ts";
import { singlePassQuery, storeSinglePassManifest } from "../single-pass.ts";
import type { BackupTransfer } from "./backup-transfer.ts";
import { partSizeOf } from "./part-size.ts";
import { tarOnly } from "./tar-only.ts";

export const multipartTransfer: BackupTransfer = {
  streamsArchive: true,
  singlePass: true,
  hashedByWorker: true,
  async transfer({ d, p, s, agent, archived, key, started }) {
    const format = tarOnly(s);
    // Single pass: the agent makes the manifest from the stream it sends; its result file is ready when the stream ends.
    const single = archived.singlePass ? await singlePassQuery(d, p) : {};
    // The stream was cut (before its headers, or during the upload): the agent's result file says why when the
    // archive itself failed (a refused name, a file changed under tar).
    const named = async (e: unknown) => {
      throw (archived.singlePass && (await agent.streamedFailure("archive", sandboxPaths.resultOut(p.snapshotId)))) || e;
    };
    const r = await agent.archiveStream({ path: archived.archiveRoot ?? p.path, ...format, filesFrom: archived.delta?.list, ...single }).catch(named);
    // Time to first byte, taken when the upload reads its first block (256 KiB, or the whole archive if smaller): no
    // TransformStream hop per chunk for it.
    let ttfbMs: number | undefined;
    // Unknown size (single pass): the smallest part, which covers archives up to ~78 GiB (tuning.partSizeMiB beyond).
    const partSize = partSizeOf(p, archived.delta?.changedBytes ?? archived.manifest?.bytes ?? 0);
    const up = await uploadStreamMultipart(d.store, key, r.body!, { partSize, concurrency: p.tuning?.concurrency ?? 2, onProgress: () => void (ttfbMs ??= since(started)) }).catch(named);
    if (archived.delta) await agent.deleteFile(archived.delta.list).catch(() => {});
    const made = archived.singlePass ? await storeSinglePassManifest(d, p, agent, await agent.streamedResult("archive", sandboxPaths.resultOut(p.snapshotId))) : {};
    return { ms: since(started), bytes: up.bytes, sha256: up.sha256, parts: up.parts, reads: up.reads, ttfbMs, ...made };
  },
};
