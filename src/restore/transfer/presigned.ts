// presigned: the agent GETs a presigned URL for the archive, piped into the extractor or to a file. No archive
// byte crosses the Worker.
import type { RestoreTransfer } from "./restore-transfer.ts";

export const presignedTransfer = (piped: boolean): RestoreTransfer => ({
  piped,
  async bring({ d, agent }, layer, to) {
    const url = await d.presigner.url(layer.archive.key, "GET");
    return agent.downloadFromUrl({ url, ...to }, layer.archive.bytes);
  },
});
