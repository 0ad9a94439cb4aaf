// The probe remembers each tool's version by its binary (path, size, mtime), so runs after the first do not spawn
// ~15 processes; a tool replaced on disk is asked again.
import { existsSync } from "node:fs";
import { chmod, mkdtemp, rm, stat, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, expect, it } from "vitest";
import { probe, seedToolVersions, toolVersionsNow } from "../../container/system/probe.ts";

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

it("versions asked at the image's build are used while each binary is the one asked; a changed one is asked again", async () => {
  process.env.PATH = `${dir}:${savedPath}`;
  const asked = join(dir, "asked");
  // A tool that says when it is run.
  await writeFile(join(dir, "lz4"), `#!/bin/sh\necho run >> ${asked}\necho "*** LZ4 command line interface 64-bits v7.7.7, by Yann Collet ***"\n`);
  await chmod(join(dir, "lz4"), 0o755);
  const written = await toolVersionsNow(); // what the image's build writes: it asks every tool once
  await rm(asked, { force: true });
  const lz4 = written.tools.find((t) => t.path === join(dir, "lz4"))!;
  expect(lz4).toMatchObject({ version: "7.7.7", size: (await stat(join(dir, "lz4"))).size });
  // A new agent process starts with that file: here, the same entry under another version, to see it taken.
  const file = join(dir, "tool-versions.json");
  await writeFile(file, JSON.stringify({ version: 1, tools: [{ ...lz4, version: "4.5.6" }] }));
  expect(await seedToolVersions(file)).toBe(1);
  expect((await probe(dir)).tools.lz4?.version).toBe("4.5.6");
  expect(existsSync(asked)).toBe(false);
  // The binary changed since the build (its mtime moved): asked again, not believed.
  await utimes(join(dir, "lz4"), new Date(), new Date(Date.now() + 5000));
  expect((await probe(dir)).tools.lz4?.version).toBe("7.7.7");
  expect(existsSync(asked)).toBe(true);
  // Not a versions file: nothing taken.
  await writeFile(file, JSON.stringify({ version: 1, tools: [{ path: "x", size: 1, mtimeMs: 1, version: "1", extra: true }] }));
  expect(await seedToolVersions(file)).toBe(0);
  expect(await seedToolVersions(join(dir, "absent.json"))).toBe(0);
});
