// The part size of a multipart backup: the one asked for in `tuning`, or one sized for the expected bytes;
// either way within R2's rules.
import { SnapflowError } from "../../errors.ts";
import { R2_MULTIPART } from "../../../container/contract/r2-limits.ts";
import { partSizeFor } from "../../store/multipart-upload.ts";
import type { BackupParams } from "../backup-params.ts";

export function partSizeOf(p: BackupParams, expected: number): number {
  const asked = p.tuning?.partSizeMiB ? p.tuning.partSizeMiB * 2 ** 20 : 0;
  const needed = partSizeFor(expected, R2_MULTIPART.minPartBytes);
  if (asked && asked < needed) {
    throw new SnapflowError("bad_request", `tuning.partSizeMiB ${p.tuning!.partSizeMiB} is too small for ${expected} bytes in ${R2_MULTIPART.maxParts} parts; use at least ${needed / 2 ** 20}`, { field: "tuning.partSizeMiB" });
  }
  return asked || partSizeFor(expected);
}
