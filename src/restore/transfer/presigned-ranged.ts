// presigned-ranged: parallel Range GETs of one presigned URL, made by the agent (fed in order into the extractor,
// or into a file) or by aria2c (into a file).
import type { RestoreTransfer } from "./restore-transfer.ts";

export const presignedRangedTransfer = (piped: boolean): RestoreTransfer => ({
  piped,
  async bring({ d, s, agent }, layer, to) {
    const url = await d.presigner.url(layer.archive.key, "GET");
    return agent.downloadRanged({ url, size: layer.archive.bytes, ...to, tool: s.downloader ?? "node", concurrency: 4 }, layer.archive.bytes);
  },
});
