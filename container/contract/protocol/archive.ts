// Archives and extraction: GET/POST /v1/archive (single pass, deltas), /v1/overlay-layer, /v1/remove, /v1/extract.
// Part of the agent's protocol (../protocol.ts re-exports every part): both sides import it.
import { z } from "zod";
import { TarFormat } from "./formats.ts";
import { ManifestSchema, ManifestTotals } from "./manifest.ts";
import { ExtractExpectation, ManifestSource, Ownership, Sha256Hex } from "./trees.ts";

/** A query parameter holding JSON (a ManifestSource with its base and layers does not fit in flat fields). */
const jsonQuery = <T extends z.ZodType>(schema: T) => z.preprocess((v) => {
  if (typeof v !== "string") return v;
  try {
    return JSON.parse(v);
  } catch {
    return v;
  }
}, schema);

const queryBool = z.preprocess((v) => (v === "true" ? true : v === "false" ? false : v), z.boolean());

/** A snapshot id, as a file name in the agent's area (manifest-kept.ts): no separators, no leading dot. */
export const KeptId = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/, "a snapshot id (letters, digits, '.', '_', '-')");
/** A kept manifest asked for: the snapshot's id, and the SHA-256 its record keeps for its whole-tree manifest. */
const BaseKept = z.object({ id: KeptId, sha256: Sha256Hex }).strict();

/** Single-pass archive options (archive.ts archiveWithManifest). */
export const SinglePassFields = {
  /** write the manifest made from the tar stream here; turns the single pass on */
  manifestOut: z.string().optional(),
  /** with manifestOut: archive only what changed since this manifest (a delta) */
  base: ManifestSource.optional(),
  /** with base: compare the content of every file whose metadata agrees */
  rehash: z.boolean().optional(),
  /** with base: write a layer manifest (version 2) over this snapshot, the base, instead of the whole tree's */
  layerOver: z.string().optional(),
  /** with base: the base's whole-tree manifest as the agent may keep it (manifest-kept.ts), used instead of `base` when it has this SHA-256 */
  baseKept: BaseKept.optional(),
  /** keep the tree's whole manifest under this snapshot id, for the next delta */
  keepAs: KeptId.optional(),
};

/** `filesFrom`: a NUL-separated list (from /v1/delta) of the entries to archive, instead of the whole tree. */
export const ArchiveQuery = TarFormat.extend({
  path: z.string(),
  filesFrom: z.string().optional(),
  manifestOut: z.string().optional(),
  /** the base manifest of a delta, as a sandbox file or a presigned GET URL */
  baseFile: z.string().optional(),
  baseUrl: z.string().optional(),
  /** the base manifest as a ManifestSource in JSON: a layer with its base and the layers between (a delta of a delta) */
  baseSource: jsonQuery(ManifestSource).optional(),
  layerOver: z.string().optional(),
  baseKept: jsonQuery(BaseKept).optional(),
  keepAs: KeptId.optional(),
  rehash: queryBool.optional(),
  /** where the SinglePassResult JSON is written before the stream ends (the streamed response cannot carry it) */
  resultOut: z.string().optional(),
});
export const ArchiveToFile = z.object({ path: z.string(), output: z.string(), format: TarFormat, filesFrom: z.string().optional(), ...SinglePassFields });

export const DeltaBody = z.object({ path: z.string(), base: z.lazy(() => ManifestSchema), list: z.string(), rehash: z.boolean().optional() });

/**
 * POST /v1/overlay-layer: an overlay delta's layer manifest, from its upper directory alone (overlay-layer.ts).
 * `path` the overlay's merged tree, `upper` and `lower` its layers; `baseTotals` the base manifest's, from its record.
 */
export const OverlayLayerBody = z.object({
  path: z.string(), upper: z.string(), lower: z.string(),
  base: z.string(), baseTotals: ManifestTotals,
  /** where the layer manifest (JSON) is written */
  manifestOut: z.string(),
}).strict();
export interface OverlayLayerResult {
  /** the layer manifest file: its size and SHA-256 (the Worker binds the store's PUT to it) */
  manifest: { bytes: number; sha256: string; entries: number; removed: number; opaque: number; totals: z.infer<typeof ManifestTotals> };
  changedBytes: number;
  ms: number;
}
export const RemoveBody = z.object({ path: z.string(), entries: z.array(z.string()) });

export const ExtractQuery = TarFormat.extend({
  path: z.string(),
  expectedFile: z.string().optional(),
  expectedUrl: z.string().optional(),
  /** the expected manifest as a ManifestSource in JSON (a tar delta's layer, with the manifests below it) */
  expectedSource: jsonQuery(ManifestSource).optional(),
  complete: queryBool.optional(),
  walk: queryBool.optional(),
  keepOwnership: queryBool.optional(),
});
export const ExtractFile = z.object({ archive: z.string(), path: z.string(), format: TarFormat, ...ExtractExpectation, ...Ownership });
