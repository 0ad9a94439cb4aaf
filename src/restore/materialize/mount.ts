// mount-kernel / mount-fuse: the staged image mounted read-only at the target (the kernel's squashfs or erofs, or
// squashfuse without CAP_SYS_ADMIN). The image stays: it backs the mount for as long as the mount lives.
//
// An image the restore trusts as it is (its SHA-256 checked on arrival, its content already checked against its
// manifest: no content check due, content-check.ts) is mounted once, straight at the target, by the swap in the
// materialize step (atTarget); verify then finds nothing to walk. One due a content check is mounted beside the
// target, every file hashed there, unmounted and mounted again at the target by verify's swap: the target never
// shows a tree before it was checked. Mounting beside the target first cost the trusted image a mount, an unmount,
// a second mount and their round trips (~0.1 s of a 0.7-0.9 s restore; scripts/experiments/mount-restore.ts).
import { SnapflowError } from "../../errors.ts";
import { since } from "../../phases/phase-runner.ts";
import { formatName, isImage } from "../../strategies/registry.ts";
import { sandboxPaths } from "../../sandbox/sandbox-paths.ts";
import type { Materialization } from "./materialization.ts";

export const mountMaterialization = (how: "mount-kernel" | "mount-fuse"): Materialization => ({
  mounts: true,
  keeps: "image",
  atTarget: {
    when: (probed) => !probed.contentCheck,
    prepare(_c, format, probed) {
      if (!isImage(format)) throw new SnapflowError("snapshot_unusable", `a ${formatName(format)} archive cannot be mounted; restore it with an extracting strategy`);
      return { ms: 0, bytes: probed.snapshot.archive.bytes, how };
    },
    mount: ({ p }, format) => {
      if (!isImage(format)) throw new SnapflowError("snapshot_unusable", `a ${formatName(format)} archive cannot be mounted; restore it with an extracting strategy`);
      return { kind: "image", archive: sandboxPaths.image(p.restoreId, format), format, how };
    },
  },
  // The check verify owes a tree that went in at materialize: at the target (a trusted image's: nothing to walk).
  afterSwap: ({ p }, check) => check(p.path),
  async materialize({ agent }, staged, format, _expected, dir) {
    const t = performance.now();
    if (!isImage(format)) throw new SnapflowError("snapshot_unusable", `a ${formatName(format)} archive cannot be mounted; restore it with an extracting strategy`);
    const done = await agent.materialize({ archive: staged, path: dir, format, how });
    return { ms: since(t), bytes: done.bytes, how, ...(done.mounted ? { mounted: done.mounted.path } : {}) };
  },
  async undo({ agent }, dir) {
    await agent.unmount(dir).catch(() => {});
  },
});
