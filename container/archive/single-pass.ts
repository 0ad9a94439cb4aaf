// What a single pass over a tree takes and answers (archive.ts makes it with tar and node-tar, engine-pass.ts with the
// native engine): one module both import, so neither imports the other.
import type { Manifest, WrittenBytes } from "../contract/protocol.ts";
import type { CompiledSelection } from "./selection.ts";

export interface SinglePassOptions {
  /** where the manifest is written (host path) */
  manifestOut: string;
  /**
   * a delta: archive only what changed since this manifest (a promise: read while the tree is walked; a function: read
   * only if the agent's own pass makes the delta, as the engine reads `baseKept` itself)
   */
  base?: Manifest | Promise<Manifest> | (() => Promise<Manifest>);
  /** with base: the agent's kept copy of it (manifest-kept.ts) and the SHA-256 it must have, for the native engine */
  baseKept?: { file: string; sha256: string };
  /** with base: compare content of every file whose metadata agrees (users who distrust timestamps) */
  rehash?: boolean;
  /** with base: write the manifest as a layer over this snapshot (the base) rather than the whole tree's */
  layerOver?: string;
  /** keep the tree's whole manifest in `dir` under snapshot `id` (manifest-kept.ts), for the next delta */
  keep?: { dir: string; id: string };
  /** with base: where the agent read it (its kept copy, or the store), asked once it is read, for the result */
  baseFrom?: () => "kept" | "store" | undefined;
  /** where the result JSON is written too (a streamed response cannot carry it) */
  resultOut?: string;
  /** a backup's selection (selection.ts): the walk leaves excluded entries out, and the manifest records it */
  selection?: CompiledSelection;
  /** which pass to make when the native engine could (default: SNAPFLOW_PACK_ENGINE, else native) */
  engine?: "native" | "node";
}

export interface SinglePassResult extends WrittenBytes {
  /**
   * `sha256`: of the manifest file (the record keeps it); `layerOf`: the file is a layer over that snapshot's;
   * `treeSha256`: of the whole-tree manifest kept beside a layer (a whole manifest's is `sha256`)
   */
  manifest: { totals: Manifest["totals"]; entries: number; jsonBytes: number; walkMs: number; sha256?: string; layerOf?: string; treeSha256?: string };
  /** entries tar archived and the agent hashed on the way */
  archived: { entries: number; tarBytes: number };
  delta?: { changed: number; changedBytes: number; deleted: string[]; suspects: number; suspectBytes: number; planMs: number; baseFrom?: "kept" | "store" };
  /** which pass made it: the native engine (engine-pass.ts) or the agent's own (tar, node-tar, zstd) */
  engine?: "native" | "node";
}
