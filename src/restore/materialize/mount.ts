// mount-kernel / mount-fuse: the staged image mounted read-only at the target (the kernel's squashfs or erofs, or
// squashfuse without CAP_SYS_ADMIN). The image stays: it backs the mount for as long as the mount lives.
import { SnapflowError } from "../../errors.ts";
import { since } from "../../phases/phase-runner.ts";
import { formatName, isImage } from "../../strategies/registry.ts";
import type { Materialization } from "./materialization.ts";

export const mountMaterialization = (how: "mount-kernel" | "mount-fuse"): Materialization => ({
  mounts: true,
  keeps: "image",
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
