// `snapflow doctor` against a store that lacks a behaviour snapflow leans on, as a person would run it: the CLI as a
// process against a private local stack whose Worker and agent reach SeaweedFS through nginx (test/store-front-nginx.ts)
// configured to drop the x-amz-checksum-sha256 response header, as a proxy or CDN passing only the headers it knows
// would. The doctor must name the composite check (HeadObject's checksum) as the one that fails, what snapflow does
// without it, and the fix; exit 1. Needs Debian's nginx-light (.ci/run installs it); skipped, saying why, without.
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { freePort, startStack, type Stack } from "../../scripts/stack/stack.ts";
import { haveNginx, NGINX, nginxStoreFront } from "../store-front-nginx.ts";

const CLI = new URL("../../scripts/cli.ts", import.meta.url).pathname;

let stack: Stack | undefined;
let dir: string;

beforeAll(async () => {
  if (!haveNginx) return;
  dir = mkdtempSync(join(tmpdir(), "snapflow-broken-store-"));
  mkdirSync(join(dir, "nginx"));
  stack = await startStack({
    port: await freePort(), privateDir: join(dir, "stack"), log: () => {},
    storeFront: (endpoint) => nginxStoreFront(join(dir, "nginx"), endpoint, ["x-amz-checksum-sha256"]),
  });
}, 120_000);

afterAll(async () => {
  await stack?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
}, 60_000);

it.skipIf(!haveNginx)(`names the composite checksum on HEAD, its consequence and its fix, when a proxy drops that header; exit 1 (needs ${NGINX})`, () => {
  const r = spawnSync(process.execPath, [CLI, "doctor"], { encoding: "utf8", env: { ...process.env, SNAPFLOW_URL: stack!.apiUrl, SNAPFLOW_TOKEN: stack!.apiToken }, timeout: 300_000 });
  expect(r.status, r.stdout + r.stderr).toBe(1);
  const failed = [...r.stdout.matchAll(/^✗ (.+?)  \(\d+ ms\)$/gm)].map((m) => m[1]);
  expect(failed, r.stdout).toEqual(["store: reports the composite checksum on HEAD"]);
  const block = r.stdout.split("\n✗ store: reports the composite checksum on HEAD")[1]!.split(/\n[✓✗!–] /)[0]!;
  expect(block).toMatch(/HeadObject in checksum mode reports no SHA-256/);
  expect(block).toMatch(/if missing: verify reads the object back instead/);
  expect(block).toMatch(/fix: check that S3_ENDPOINT is the store itself .* drops the x-amz-checksum-sha256 response header of HeadObject/);
  // Everything else still works through it: the bound PUTs, create-only, the part checksums, the runs.
  expect(r.stdout).toMatch(/^✓ store: accepts a presigned PUT bound to its SHA-256/m);
  expect(r.stdout).toMatch(/^✓ runs: 10 MB backup and restore, default presets/m);
  expect(r.stdout).toMatch(/^1 check\(s\) failed in \d/m);
}, 320_000);
