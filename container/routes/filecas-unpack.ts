// The file-level format's extract restore (issue 24): POST /v1/files/unpack makes a snapshot's tree from its index
// and packs with the native engine (extract/engine-files-unpack.ts), into a staging directory inside the target as
// every extraction (safe-extract.ts: mode 0700, merged by descriptors, removed whatever happens).
import { mkdir, readdir } from "node:fs/promises";
import { dirname } from "node:path";
import * as P from "../contract/protocol.ts";
import { AgentError } from "../http/agent-error.ts";
import { engineBinary } from "../archive/engine-pass.ts";
import { extractSafely } from "../extract/safe-extract.ts";
import { filesUnpackWithEngine } from "../extract/engine-files-unpack.ts";
import { checkedChain } from "./index-chain.ts";
import type { Routes } from "./route.ts";

export const filecasUnpackRoutes: Routes = {
  "POST /v1/files/unpack": async (c) => {
    const body = await c.json(P.FilesUnpackBody);
    const dir = await c.path(body.path, "path");
    const index = "file" in body.index
      ? { file: await c.path(body.index.file, "index.file"), ...(body.index.sha256 ? { sha256: body.index.sha256 } : {}), ...checkedChain(c, body.index.chain, "index") }
      : { url: c.storeUrl(body.index.url, "index.url"), sha256: body.index.sha256, ...checkedChain(c, body.index.chain, "index") };
    const packs: Record<string, string> = {};
    for (const [name, url] of Object.entries(body.packs)) packs[name] = c.storeUrl(url, `packs.${name}`);
    // The engine's walk is of what it made: the result is that tree only when the target held nothing before.
    const names = await readdir(dir).catch((err: NodeJS.ErrnoException) => (err.code === "ENOENT" ? [] : null));
    if (names === null || names.length > 0) throw new AgentError("bad_request", "path: must be an empty directory, or not there yet", "path");
    const bin = await engineBinary();
    if (!bin) throw new AgentError("unavailable", "snapflow-lazy is not installed here (build it with native/lazy/build.sh)");
    const statsOut = body.statsOut !== undefined ? await c.path(body.statsOut, "statsOut") : undefined;
    if (statsOut) await mkdir(dirname(statsOut), { recursive: true });
    const manifest = body.manifest ? { url: c.storeUrl(body.manifest.url, "manifest.url"), sha256: body.manifest.sha256 } : undefined;
    const request = { index, packs, keepOwners: body.keepOwners, walk: body.walk, concurrency: body.concurrency, ...(statsOut ? { statsOut } : {}), ...(manifest ? { manifest } : {}) };
    return extractSafely(dir, undefined, (into) => filesUnpackWithEngine(bin, into, request), { keepOwnership: body.keepOwners, madeClean: true });
  },
};
