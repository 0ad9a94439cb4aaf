// Stopping the stack leaves nothing mounted (scripts/stack/detach-mounts.ts): a restore's mounts, a lazy restore's
// FUSE file above all, would otherwise outlive the agent and its helpers, dead (every read an I/O error) until the
// next start swept them. Here a private stack is started, a mount is made in one of its sandboxes as a restore's would
// be, and the stack is stopped.
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, expect, it } from "vitest";
import { mountsBelow } from "../../scripts/stack/detach-mounts.ts";
import { freePort, startStack } from "../../scripts/stack/stack.ts";

const dir = mkdtempSync(join(tmpdir(), "snapflow-stop-"));
afterAll(() => {
  for (const m of mountsBelow(dir).reverse()) spawnSync("umount", ["-l", m]);
  rmSync(dir, { recursive: true, force: true });
});

const noRoot = process.getuid?.() !== 0 ? "mounting needs root" : undefined;

it.skipIf(noRoot)(`the stack's stop detaches every mount its sandboxes held, the last made first${noRoot ? ` — SKIPPED: ${noRoot}` : ""}`, async () => {
  const stack = await startStack({ port: await freePort(), privateDir: dir, log: () => {} });
  const app = join(dir, "sandboxes", "stop-test", "workspace", "app");
  mkdirSync(join(app, "inner"), { recursive: true });
  // Two mounts, one on the other, as an overlay stands on its image.
  expect(spawnSync("mount", ["-t", "tmpfs", "tmpfs", app]).status).toBe(0);
  mkdirSync(join(app, "inner"), { recursive: true });
  expect(spawnSync("mount", ["-t", "tmpfs", "tmpfs", join(app, "inner")]).status).toBe(0);
  expect(mountsBelow(join(dir, "sandboxes"))).toEqual([app, join(app, "inner")]);
  await stack.stop();
  expect(mountsBelow(join(dir, "sandboxes"))).toEqual([]);
});

it("mountsBelow reads mountinfo's escaped paths and keeps only what is at or below the directory", () => {
  const info = [
    "36 35 98:0 / /mnt/a rw - tmpfs tmpfs rw",
    "37 35 98:0 / /mnt/a\\040b/c rw - tmpfs tmpfs rw",
    "38 35 98:0 / /mnt/ab rw - tmpfs tmpfs rw",
  ].join("\n");
  expect(mountsBelow("/mnt/a", info)).toEqual(["/mnt/a"]);
  expect(mountsBelow("/mnt/a b", info)).toEqual(["/mnt/a b/c"]);
});
