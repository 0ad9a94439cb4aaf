// A restored overlay delta's opaque directories, marked again. overlayfs hides everything of a lower directory below
// an upper directory that carries trusted.overlay.opaque=y: what a fork's directory deleted and made again looks like
// in its upper. tar does not carry that xattr, so the restored upper lacks the mark and the parent's old entries would
// show through (the restore's walk then refuses the tree). The layer manifest, checked against the snapshot record's
// hash, lists those directories (overlay-layer.ts found them from the merged listing); snapflow-lazy `opaque` sets
// the mark through descriptors that never follow a symlink, since the upper is another sandbox's archive.
import { runLazyTool } from "../system/lazy-tool.ts";
import { loadLayerManifest } from "../manifest/manifest-file.ts";

export async function markOpaqueDirs(upper: string, layer: { url: string; sha256?: string }): Promise<{ marked: number; ms: number }> {
  const started = performance.now();
  const dirs = (await loadLayerManifest(layer, "layer"))?.opaque ?? [];
  // NUL-separated on stdin: names may hold any byte but NUL.
  const { marked } = dirs.length ? await runLazyTool<{ marked: number }>(["opaque", "--root", upper], Buffer.from(dirs.map((d) => `${d}\0`).join(""))) : { marked: 0 };
  return { marked, ms: Math.round(performance.now() - started) };
}
