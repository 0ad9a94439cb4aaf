#!/usr/bin/env node
// The Worker stays deployable: builds the deploy bundle exactly as `wrangler deploy` would, without an account or
// Docker (`--dry-run --containers-rollout=none`), and fails when the build fails or the bundle outgrows its limit.
// Prints the bundle's size, raw and gzipped. `npm run deploy:check` (and .ci/run) runs it.
//
// The limits: Cloudflare measures a Worker's size after compression, 3 MB on Workers Free and 10 MB on Paid
// (developers.cloudflare.com/workers/platform/limits). On 2026-11-26 the bundle was 1.8 MB, 363 KB gzipped. 1 MiB
// gzipped leaves ~2.8× room to grow, stays a third of the Free plan's limit, and trips on the mistakes that bloat
// a bundle at once (a whole SDK, a data file, a second copy of a dependency) while they are one commit old. The raw
// limit (6 MiB, ~3.3×) guards what compression hides: every byte of code is parsed at startup (1 s allowed).
//
// Usage: node scripts/deploy-check.ts [--outdir DIR] [--max-gzip-kib N] [--max-raw-kib N]
import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { gzipSync } from "node:zlib";
import { PROJECT, toolEnv } from "./stack/stack.ts";

const DEFAULT_MAX_GZIP_KIB = 1024;
const DEFAULT_MAX_RAW_KIB = 6 * 1024;

const { values } = parseArgs({ options: { outdir: { type: "string" }, "max-gzip-kib": { type: "string" }, "max-raw-kib": { type: "string" } } });
const maxGzipKiB = Number(values["max-gzip-kib"] ?? DEFAULT_MAX_GZIP_KIB);
const maxRawKiB = Number(values["max-raw-kib"] ?? DEFAULT_MAX_RAW_KIB);
const outdir = values.outdir ?? mkdtempSync(join(tmpdir(), "snapflow-deploy-check-"));

const wrangler = spawnSync(join(PROJECT, "node_modules/.bin/wrangler"), ["deploy", "--dry-run", "--containers-rollout=none", "--outdir", outdir], {
  cwd: PROJECT,
  env: toolEnv(),
  encoding: "utf8",
});
if (wrangler.status !== 0) {
  console.error(`deploy check: wrangler deploy --dry-run failed (${wrangler.error?.message ?? `exit ${wrangler.status}`}):\n${wrangler.stdout}${wrangler.stderr}`);
  process.exit(1);
}
// What is uploaded: every module wrangler wrote, not its source maps or the README it leaves beside them.
const modules = readdirSync(outdir).filter((f) => /\.(m?js|cjs|wasm)$/.test(f));
if (modules.length === 0) {
  console.error(`deploy check: wrangler wrote no module to ${outdir}:\n${wrangler.stdout}`);
  process.exit(1);
}
const raw = modules.reduce((n, f) => n + statSync(join(outdir, f)).size, 0);
const gzipped = modules.reduce((n, f) => n + gzipSync(readFileSync(join(outdir, f))).length, 0);
const kib = (n: number) => `${(n / 1024).toFixed(2)} KiB`;
// wrangler's own figure, for comparison with ours (the same bytes, its gzip level may differ slightly)
const wranglerSays = wrangler.stdout.match(/Total Upload: .*/)?.[0];
console.log(`deploy check: ${modules.join(", ")}: ${kib(raw)} (limit ${maxRawKiB} KiB), gzip ${kib(gzipped)} (limit ${maxGzipKiB} KiB)${wranglerSays ? `; wrangler: ${wranglerSays}` : ""}`);
if (values.outdir === undefined) rmSync(outdir, { recursive: true, force: true });
const over = [...(gzipped > maxGzipKiB * 1024 ? [`gzipped ${kib(gzipped)} > ${maxGzipKiB} KiB`] : []), ...(raw > maxRawKiB * 1024 ? [`raw ${kib(raw)} > ${maxRawKiB} KiB`] : [])];
if (over.length) {
  console.error(`deploy check: the Worker's bundle outgrew its limit: ${over.join("; ")}. Find what grew (esbuild's --metafile, or the .map in --outdir) before raising the limit in scripts/deploy-check.ts.`);
  process.exit(1);
}
