// How large a tar archive of a tree can be at most, before it is made: the Worker signs a presigned multipart upload's
// part URLs up front (the engine cannot ask for more mid-stream), so it needs a bound, not the archive's size. The
// native engine counts by directory descriptors (`snapflow-lazy size`, internal/treesize: a metadata pass, ~0.1 s for
// 31.7k entries here); without it, the agent's own metadata walk (tree-walk.ts) gives the same bound, slower.
//
// tarMax = Σ (file or symlink target bytes, rounded up to 512) + 2 KiB per entry (header and PAX record) + 1 KiB of end
// blocks. zstd only shrinks that (but for a few bytes per 128 KiB of incompressible data: the Worker's headroom).
import { z } from "zod";
import { AgentError } from "../http/agent-error.ts";
import { engineBinary } from "../archive/engine-pass.ts";
import type { TreeSizeResult } from "../contract/protocol.ts";
import { walkTree } from "../manifest/tree-walk.ts";
import { runTool } from "../system/run-tool.ts";
import { safeJson } from "../system/engine-answer.ts";

/** The engine's per-entry allowance (internal/treesize TarOverheadPerEntry). */
const TAR_OVERHEAD_PER_ENTRY = 2048;

const NativeSize = z.object({ entries: z.number().int().nonnegative(), bytes: z.number().int().nonnegative(), tarMax: z.number().int().nonnegative(), ms: z.number().nonnegative() });

export async function treeSize(dir: string): Promise<TreeSizeResult> {
  const bin = await engineBinary();
  if (bin) {
    const out = await runTool([bin, "size", "--root", dir], 120_000).catch((e: unknown) => {
      // A binary from before `size` answers its usage and exit 2: count here instead.
      if (e instanceof AgentError && / exited 2: usage:/.test(e.message)) return undefined;
      throw e;
    });
    if (out !== undefined) {
      const parsed = NativeSize.safeParse(safeJson(out));
      if (!parsed.success) throw new AgentError("tool_failed", `snapflow-lazy size answered what is not a count: ${out.slice(0, 200)}`);
      return { ...parsed.data, by: "native" };
    }
  }
  const started = performance.now();
  let entries = 0;
  let bytes = 0;
  let tarMax = 1024;
  for await (const e of walkTree(dir)) {
    entries++;
    const size = e.type === "file" || e.type === "symlink" ? e.size : 0;
    bytes += size;
    tarMax += Math.ceil(size / 512) * 512 + TAR_OVERHEAD_PER_ENTRY;
  }
  return { entries, bytes, tarMax, ms: Math.round(performance.now() - started), by: "node" };
}

