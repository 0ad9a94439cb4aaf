// Every extraction the agent does (tar, unsquashfs, fsck.erofs) goes through here: the archive is extracted into an empty staging
// directory inside the target (so no symlink already on disk can redirect a write, and rename stays on one
// filesystem; mode 0700, so nobody but root reaches what the archive holds before it is cleaned), cleaned of
// device nodes and, unless `keepOwnership`, of setuid/setgid bits and foreign owners (sanitize-extracted.ts), and
// merged into the target by safe-merge.ts, which never resolves a symlink in the target. A verified extraction walks the target after the merge (the
// whole tree, as the manifest describes it), not the staging directory. Staging is removed whatever happens.
// `madeClean`: the extractor made nothing the cleaning would change (the native engine, engine-unpack.ts, makes no
// device and gives owners and set-id bits only when asked), so the tree is not walked again for it.
import { randomBytes } from "node:crypto";
import { chmod, mkdir, rm } from "node:fs/promises";
import { join } from "node:path";
import type { ExtractVerification, VerifiedExtract } from "./extract.ts";
import { mergeInto } from "./safe-merge.ts";
import { sanitizeExtracted } from "./sanitize-extracted.ts";
import { checkTree, verifyFailed } from "../manifest/tree-verify.ts";

/** Runs `extract` into a staging directory and merges the result into `dir`; see the file comment. */
export async function extractSafely<T extends object>(
  dir: string,
  verify: ExtractVerification | undefined,
  extract: (into: string, verify: ExtractVerification | undefined) => Promise<T>,
  options: { keepOwnership?: boolean; madeClean?: boolean } = {},
): Promise<T> {
  await mkdir(dir, { recursive: true });
  const staging = join(dir, `.snapflow-layer-${randomBytes(6).toString("hex")}`);
  await mkdir(staging);
  await chmod(staging, 0o700); // mkdir's mode is cut by the umask; this is not
  try {
    const walk = verify ? (verify.walk ?? verify.complete ?? true) : false;
    const extractedAt = Date.now();
    const result = await extract(staging, verify ? { ...verify, walk: false } : undefined);
    if (!options.madeClean) await sanitizeExtracted(staging, options);
    await mergeInto(staging, dir, extractedAt, options);
    await rm(staging, { recursive: true, force: true });
    if (verify && walk && "verified" in result) {
      const verified = (result as unknown as VerifiedExtract).verified;
      const walked = await checkTree(dir, verify.expected, { limit: verify.limit, ignoreSetid: true, keepOwnership: options.keepOwnership });
      if (!walked.equal) throw verifyFailed("the restored tree", walked);
      Object.assign(verified, { metadata: "walk", walked: walked.verified.entries, walkMs: walked.ms, ...(walked.verified.owners ? { owners: walked.verified.owners } : {}) });
    }
    return result;
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
}
