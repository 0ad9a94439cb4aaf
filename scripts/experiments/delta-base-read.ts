// What a 10 MB incremental costs the agent before its first archive byte, the base manifest read first and
// validated (as before layers and kept manifests: loadManifest of the base, then the walk) against the kept copy
// read while the tree is walked (archive.ts, manifest-kept.ts), alternated on the same tree (node engine, zstd -3,
// archive to /dev/null). `node scripts/experiments/delta-base-read.ts DIR [RUNS]`; DIR is changed (10 MB of new
// files under peers-change-x/) and put back.
import { mkdir, rm, writeFile } from "node:fs/promises";
import { createWriteStream } from "node:fs";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { archiveWithManifest } from "../../container/archive/archive.ts";
import { loadManifest } from "../../container/manifest/manifest-file.ts";
import { keptManifest } from "../../container/manifest/manifest-kept.ts";
import type { TarFormat } from "../../container/contract/protocol.ts";

const dir = process.argv[2]!;
const runs = Number(process.argv[3] ?? 5);
const scratch = "/tmp/delta-base-read";
const format: TarFormat = { kind: "tar", compression: "zstd", level: 3, threads: 0 };
await rm(scratch, { recursive: true, force: true });
await mkdir(scratch, { recursive: true });

function sink() {
  const out = createWriteStream("/dev/null");
  const t0 = performance.now();
  let first: number | undefined;
  const write = out.write.bind(out);
  out.write = ((chunk: any, ...rest: any[]) => ((first ??= performance.now() - t0), write(chunk, ...rest))) as typeof out.write;
  return { out, ttfb: () => first, t0 };
}

const full = await archiveWithManifest(dir, format, sink().out, { manifestOut: join(scratch, "full.json"), keep: { dir: join(scratch, "kept"), id: "bk-full" }, engine: "node" });
const sha = full.manifest.sha256!;
const changed = join(dir, "peers-change-x");
await mkdir(changed, { recursive: true });
for (let i = 0; i < 8; i++) await writeFile(join(changed, `f${i}.bin`), randomBytes(1_250_000));

const results: Record<string, { ttfb: number; total: number; walk: number }[]> = { before: [], after: [] };
try {
  for (let r = 0; r < runs; r++) {
    for (const variant of r % 2 ? ["after", "before"] : ["before", "after"]) {
      const s = sink();
      if (variant === "before") {
        const base = await loadManifest({ file: join(scratch, "full.json") }, "base");
        const res = await archiveWithManifest(dir, format, s.out, { manifestOut: join(scratch, "d.json"), base, engine: "node" });
        results.before!.push({ ttfb: s.ttfb()!, total: performance.now() - s.t0, walk: res.manifest.walkMs });
      } else {
        const base = keptManifest(join(scratch, "kept"), "bk-full", sha).then((m) => m!);
        const res = await archiveWithManifest(dir, format, s.out, { manifestOut: join(scratch, "d.json"), base, layerOver: "bk-full", keep: { dir: join(scratch, "kept-deltas"), id: `bk-d${r}` }, engine: "node" });
        results.after!.push({ ttfb: s.ttfb()!, total: performance.now() - s.t0, walk: res.manifest.walkMs });
      }
    }
  }
} finally {
  await rm(changed, { recursive: true, force: true });
}
const median = (xs: number[]) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
for (const [k, v] of Object.entries(results)) {
  console.log(`${k}: ttfb ${Math.round(median(v.map((x) => x.ttfb)))} ms, total ${Math.round(median(v.map((x) => x.total)))} ms, walk ${median(v.map((x) => x.walk))} ms (median of ${v.length}; ttfb ${v.map((x) => Math.round(x.ttfb)).join(" ")})`);
}
