// A file-level snapshot stores no manifest: its index holds every manifest entry (native/lazy/internal/filecas), so
// the native engine makes the manifest from it where a reader needs one (`snapflow-lazy files-manifest`): the index
// read from the store (bounded, checked against its record's SHA-256, validated), the manifest written beside `out`
// and named once whole. It is what the backup's pass wrote, byte for byte, so its SHA-256 must be the one the record
// keeps: a difference is verify_failed, and nothing is left at `out`.
//
//   index's presigned GET ──▶ snapflow-lazy files-manifest ──▶ out (the manifest JSON)
//                               └──result JSON (fd 3)──▶ its bytes and SHA-256, compared with the record's
import { rm } from "node:fs/promises";
import { z } from "zod";
import { ManifestTotals, Sha256Hex, type SelectionRecord } from "../contract/protocol.ts";
import { AgentError } from "../http/agent-error.ts";
import { askEngine } from "../system/engine-answer.ts";
import { findOnPath } from "../system/find-on-path.ts";
import { storeIdleMs } from "../transfer/stall-deadline.ts";

/** Where a file-level snapshot's manifest comes from, the URL already checked against the store's origin. */
export interface FromIndex {
  /** `chain`: a layered index's objects beneath it, whole index first (the URLs checked too) */
  index: { url: string; sha256: string; chain?: { url: string; sha256: string }[] };
  /** the manifest's SHA-256, as the record keeps it */
  sha256: string;
  selection?: SelectionRecord;
  /** where the engine writes it (a staging file of the request's) */
  out: string;
}

const Made = z.object({ entries: z.number().int().nonnegative(), totals: ManifestTotals, jsonBytes: z.number().int().nonnegative(), jsonSha256: Sha256Hex }).passthrough();

/** Writes the manifest to `source.out`, checked against the record's SHA-256; answers its size. */
export async function manifestFromIndex(source: FromIndex, field: string): Promise<{ bytes: number }> {
  const bin = await findOnPath("snapflow-lazy");
  if (!bin) throw new AgentError("unavailable", `${field}: a file-level snapshot's manifest is made from its index by snapflow-lazy, which this sandbox does not have`, field);
  const line = { index: source.index, ...(source.selection ? { selection: source.selection } : {}), idleSeconds: Math.max(1, Math.round(storeIdleMs() / 1000)), retries: 4 };
  const made = await askEngine([bin, "files-manifest", "--out", source.out, "--result-fd", "3"], line, {
    result: Made, lacking: () => new AgentError("unavailable", "snapflow-lazy here has no files-manifest subcommand"),
    // The engine names its index fields "index…"; the request's field is this source's.
    failed: (f) => new AgentError(f.code, `${field}: ${f.message}`, f.field ? `${field}.${f.field}` : field),
  }).catch(async (e: unknown) => {
    await rm(source.out, { force: true }); // an answer that is not a result may have left the file named
    throw e;
  });
  if (made.jsonSha256 !== source.sha256) {
    await rm(source.out, { force: true });
    throw new AgentError("verify_failed", `${field}: the manifest made from the index has sha256 ${made.jsonSha256}, its snapshot's record says ${source.sha256}`, field);
  }
  return { bytes: made.jsonBytes };
}
