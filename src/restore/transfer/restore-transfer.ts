// The interface every restore transfer path implements: how one archive travels from the store into the sandbox,
// either piped straight into the extractor at the target or written to a staging file. One module per way of
// fetching (push, presigned, presigned-ranged), each giving a file and a pipe variant; index.ts gathers them by
// the registry's RestorePath.
import type { ManifestSource } from "../../../container/contract/protocol.ts";
import type { TarFormat, WrittenBytes } from "../../../container/contract/protocol.ts";
import type { RestoreContext } from "../restore-context.ts";
import type { Layer } from "../restore-params.ts";

/**
 * Where the bytes go: into `tar x` at a directory, or to a file. Extracting with an expected manifest checks each
 * entry as it streams into tar (complete: the archive holds the whole tree; walk: compare the result's metadata
 * afterwards — a delta chain walks after its last layer).
 */
export type Destination = { extract: ExtractTo } | { output: string };
export interface ExtractTo {
  path: string;
  format: TarFormat;
  expected?: ManifestSource;
  complete?: boolean;
  walk?: boolean;
  /** the restore's keepOwnership (restore-params.ts) */
  keepOwnership?: boolean;
}

export interface RestoreTransfer {
  /** true: bytes are extracted as they arrive (materialize has nothing left to do); false: they land in a file */
  readonly piped: boolean;
  /** Brings one layer's archive; returns the size and SHA-256 of the bytes that arrived (the caller checks them). */
  bring(c: RestoreContext, layer: Layer, to: Destination): Promise<WrittenBytes>;
}
