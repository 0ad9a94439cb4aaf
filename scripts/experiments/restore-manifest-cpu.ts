// What a verified restore's reading of its manifest costs the agent's CPU on a workspace-sized tree: a node-modules
// dataset (N files) archived by the single pass (tar, no compression), then extracted with the in-stream check and the
// walk (extract.ts), the manifest named as a sandbox file. Run on a commit before and after issue 21's streaming to
// compare; `node scripts/experiments/restore-manifest-cpu.ts [FILES] [RUNS]` (default 30000, 5).
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { generateDataset } from "../../container/system/dataset.ts";
import { archiveWithManifestToFile } from "../../container/archive/archive.ts";
import { extractFromFile } from "../../container/extract/extract.ts";
import * as manifestFile from "../../container/manifest/manifest-file.ts";
import type { TarFormat } from "../../container/contract/protocol.ts";

const files = Number(process.argv[2] ?? 30_000);
const runs = Number(process.argv[3] ?? 5);
const scratch = `/tmp/restore-manifest-cpu-${process.pid}`;
const format: TarFormat = { kind: "tar", compression: "none" };
await generateDataset(join(scratch, "src"), { kind: "node-modules", seed: 1, files, path: "", replace: false } as never);
const made = await archiveWithManifestToFile(join(scratch, "src"), format, join(scratch, "a.tar"), { manifestOut: join(scratch, "m.json") });
console.log(`${made.manifest?.entries ?? "?"} entries; reader: ${"openManifest" in manifestFile ? "streamed" : "whole"}`);
const cpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};
for (let r = 0; r < runs; r++) {
  await rm(join(scratch, "out"), { recursive: true, force: true });
  const t = cpuMs();
  const m = manifestFile as unknown as Record<string, (s: unknown, f: string) => Promise<never>>;
  const expected = "openManifest" in manifestFile ? await m.openManifest!({ file: join(scratch, "m.json") }, "expected") : await m.loadManifest!({ file: join(scratch, "m.json") }, "expected");
  const got = await extractFromFile(join(scratch, "a.tar"), format, join(scratch, "out"), { expected });
  console.log(`run ${r}: agent ${Math.round(cpuMs() - t)} CPU-ms (${"verified" in got ? got.verified.entries : "?"} entries checked in the stream, walk ${"verified" in got ? got.verified.walked : "?"})`);
}
await rm(scratch, { recursive: true, force: true });
