// push: store → Worker (R2 get) → the agent's request body, piped into the extractor or written to a file. The
// seeds found containerFetch could not carry large request bodies in production; kept as a preset to compare.
import { SnapflowError } from "../../errors.ts";
import type { RestoreTransfer } from "./restore-transfer.ts";

export const pushTransfer = (piped: boolean): RestoreTransfer => ({
  piped,
  async bring({ d, agent }, layer, to) {
    const o = await d.store.get(layer.archive.key);
    if (!o) throw new SnapflowError("snapshot_unusable", `archive ${layer.archive.key} of snapshot ${layer.id} is missing from the store`);
    if (!("extract" in to)) return agent.writeFile(to.output, o.body);
    const { path, format, expected, complete, walk, keepOwnership } = to.extract;
    // A request body cannot also carry the manifest: the agent fetches it from its own presigned URL.
    return agent.extractStream({ path, ...format, ...(expected ? ("url" in expected && Object.keys(expected).length === 1 ? { expectedUrl: expected.url } : { expectedSource: JSON.stringify(expected) }) : {}), complete, walk, keepOwnership }, o.body);
  },
});
