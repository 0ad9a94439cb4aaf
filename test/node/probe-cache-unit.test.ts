// The probe remembers each tool's version by its binary (path, size, mtime), so runs after the first do not spawn
// ~15 processes; a tool replaced on disk is asked again.
import { chmod, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, expect, it } from "vitest";
import { probe } from "../../container/system/probe.ts";

const dir = await mkdtemp(join(tmpdir(), "probe-cache-"));
const savedPath = process.env.PATH;
afterAll(async () => {
  process.env.PATH = savedPath;
  await rm(dir, { recursive: true, force: true });
});

async function fakeLz4(version: string) {
  await writeFile(join(dir, "lz4"), `#!/bin/sh\necho "*** LZ4 command line interface 64-bits v${version}, by Yann Collet ***"\n`);
  await chmod(join(dir, "lz4"), 0o755);
}

it("a tool upgraded on disk is asked for its version again; an unchanged one is remembered", async () => {
  process.env.PATH = `${dir}:${savedPath}`;
  await fakeLz4("1.2.3");
  expect((await probe(dir)).tools.lz4).toEqual({ path: join(dir, "lz4"), version: "1.2.3" });
  expect((await probe(dir)).tools.lz4?.version).toBe("1.2.3");
  await fakeLz4("10.20.30"); // a longer file: its size changes even within the same mtime tick
  expect((await probe(dir)).tools.lz4?.version).toBe("10.20.30");
});
