// An image of a tree and its manifest, for a backup. Where a builder reads tar (squashfs through tar2sqfs, from
// squashfs-tools-ng), the image is built from the same tar stream that is hashed into the manifest: one read of the
// tree, and the manifest describes exactly what went into the image.
//
//   tree-walk ──names──▶ tar -T - ──▶ TarManifestStream ──▶ tar2sqfs ──▶ image file
//
// Otherwise (erofs: Debian's mkfs.erofs 1.5 has no tar input; squashfs without tar2sqfs) the manifest is a hashing
// walk of its own and the image is built from the tree: two reads, as before. Either way the answer has the same
// shape, and `onePass` says which it was.
import { lstat, mkdir, rm, writeFile } from "node:fs/promises";
import { availableParallelism } from "node:os";
import { dirname } from "node:path";
import type { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { AgentError } from "../http/agent-error.ts";
import { singlePassInto, type SinglePassOptions, type SinglePassResult, type TarSink } from "../archive/archive.ts";
import { findOnPath } from "../system/find-on-path.ts";
import { tar2sqfsArgv } from "./image-argv.ts";
import { hashImageFile, makeImage } from "./images.ts";
import { writeManifest } from "../manifest/manifest-file.ts";
import { takeManifest } from "../manifest/manifest.ts";
import type { ImageFormat, SquashfsFormat } from "../contract/protocol.ts";
import { startTool, toolAndFlow } from "../system/run-tool.ts";
import { excludedTopLevel } from "../archive/selection.ts";

/**
 * Compressors whose tar2sqfs images Debian's unsquashfs and kernel read back. lz4 is not among them: tar2sqfs 1.2's
 * lz4 images fail `unsquashfs` 4.5.1 with "failed to read id table block", so lz4 images take two passes.
 */
const TAR2SQFS_COMPRESSORS: ReadonlySet<SquashfsFormat["compression"]> = new Set(["zstd", "gzip", "lzo", "xz"]);

export interface ImageWithManifest extends SinglePassResult {
  onePass: boolean;
}

function imageSink(format: SquashfsFormat, output: string, root: Parameters<typeof tar2sqfsArgv>[3]): TarSink {
  const builder = startTool(tar2sqfsArgv(output, format, availableParallelism(), root), { stdin: "pipe", stdout: "ignore" });
  builder.child.stdin!.on("error", () => {});
  return {
    flows: (tarBytes: Readable) => [toolAndFlow(builder, pipeline(tarBytes, builder.child.stdin!))],
    abort() {
      if (builder.child.exitCode === null) builder.child.kill("SIGTERM");
    },
    written: () => hashImageFile(output),
    finish: async () => {},
  };
}

export async function makeImageWithManifest(dir: string, format: ImageFormat, output: string, options: SinglePassOptions): Promise<ImageWithManifest> {
  if (output === dir || output.startsWith(dir + "/")) throw new AgentError("bad_request", "output: the image cannot be written inside the tree it is made of", "output");
  await rm(output, { force: true });
  await mkdir(dirname(output), { recursive: true });
  if (format.kind === "squashfs" && TAR2SQFS_COMPRESSORS.has(format.compression) && (await findOnPath("tar2sqfs"))) {
    const st = await lstat(dir);
    const root = { uid: st.uid, gid: st.gid, mode: st.mode, mtime: Math.floor(st.mtimeMs / 1000) };
    try {
      return { ...(await singlePassInto(dir, imageSink(format, output, root), options)), onePass: true };
    } catch (e) {
      await rm(output, { force: true });
      throw e;
    }
  }
  return twoPasses(dir, format, output, options);
}

async function twoPasses(dir: string, format: ImageFormat, output: string, options: SinglePassOptions): Promise<ImageWithManifest> {
  const started = performance.now();
  const selection = options.selection;
  const taken = await takeManifest(dir, { exclude: selection?.exclude });
  const manifest = selection ? { ...taken, selection: selection.record() } : taken;
  const walkMs = Math.round(performance.now() - started);
  const made = await makeImage(dir, format, output, selection ? await excludedTopLevel(dir, selection) : []);
  const jsonBytes = await writeManifest(options.manifestOut, manifest);
  const result: ImageWithManifest = {
    bytes: made.bytes,
    sha256: made.sha256,
    ms: Math.round(performance.now() - started),
    manifest: { totals: manifest.totals, entries: manifest.entries.length, jsonBytes, walkMs },
    archived: { entries: manifest.entries.length, tarBytes: 0 },
    onePass: false,
  };
  if (options.resultOut) await writeFile(options.resultOut, JSON.stringify(result));
  return result;
}
