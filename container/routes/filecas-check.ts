// The content check of a file-level wake's tree (contract/protocol/filecas-check.ts): POST /v1/files/check hands the
// snapshot's index to the native engine (`snapflow-lazy files-check`), which hashes the files it names beneath the
// target by descriptors; the agent only checks the request (the URLs on the store's origin) and the answer.
import * as P from "../contract/protocol.ts";
import { AgentError } from "../http/agent-error.ts";
import { engineBinary } from "../archive/engine-pass.ts";
import { askEngine } from "../system/engine-answer.ts";
import { storeIdleMs } from "../transfer/stall-deadline.ts";
import { checkedChain } from "./index-chain.ts";
import { existingDir, type Routes } from "./route.ts";

export const filecasCheckRoutes: Routes = {
  "POST /v1/files/check": async (c) => {
    const body = await c.json(P.FilesCheckBody);
    const dir = await existingDir(await c.path(body.path, "path"), "path");
    const index = { url: c.storeUrl(body.index.url, "index.url"), sha256: body.index.sha256, ...checkedChain(c, body.index.chain, "index") };
    const bin = await engineBinary();
    if (!bin) throw new AgentError("unavailable", "snapflow-lazy is not installed here (build it with native/lazy/build.sh)");
    const line = { index, layerOnly: body.layerOnly, limit: body.limit, idleSeconds: Math.max(1, Math.round(storeIdleMs() / 1000)), retries: 4 };
    return askEngine([bin, "files-check", "--root", dir, "--result-fd", "3"], line, {
      result: P.FilesCheckResult,
      lacking: () => new AgentError("unavailable", "snapflow-lazy here has no files-check subcommand (build it again with native/lazy/build.sh)"),
    });
  },
};
