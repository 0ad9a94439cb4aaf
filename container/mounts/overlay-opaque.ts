// A restored overlay delta's opaque directories, marked again. overlayfs hides everything of a lower directory below
// an upper directory that carries trusted.overlay.opaque=y: what a fork's directory deleted and made again looks like
// in its upper. tar does not carry that xattr, so the restored upper lacks the mark and the parent's old entries would
// show through (the restore's walk then refuses the tree). The layer manifest, checked against the snapshot record's
// hash, lists those directories (overlay-layer.ts found them from the merged listing); snapflow-lazy `opaque` sets
// the mark through descriptors that never follow a symlink, since the upper is another sandbox's archive. POST
// /v1/download does it for a delta it extracts, given the delta's layer manifest (routes/transfer.ts).
import { runLazyTool } from "../system/lazy-tool.ts";
import { loadLayerManifest } from "../manifest/manifest-file.ts";

/** The directories a layer manifest (checked against its record's SHA-256) lists as opaque. */
export async function opaqueDirsOf(layer: { url: string; sha256?: string }, field = "layer"): Promise<string[]> {
  return (await loadLayerManifest(layer, field))?.opaque ?? [];
}

/** Marks each of `dirs` (names below `upper`) opaque, through descriptors beneath it. */
export async function markDirs(upper: string, dirs: string[]): Promise<{ marked: number }> {
  // NUL-separated on stdin: names may hold any byte but NUL.
  return dirs.length ? runLazyTool<{ marked: number }>(["opaque", "--root", upper], Buffer.from(dirs.map((d) => `${d}\0`).join(""))) : { marked: 0 };
}
