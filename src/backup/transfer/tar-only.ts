// Streaming paths pipe tar's output: images (mksquashfs, mkfs.erofs) are made to a file and cannot stream.
import type { TarFormat } from "../../../container/contract/protocol.ts";
import { SnapflowError } from "../../errors.ts";
import { formatName, type BackupStrategy } from "../../strategies/registry.ts";

export function tarOnly(s: BackupStrategy): TarFormat {
  if (s.format.kind !== "tar") throw new SnapflowError("bad_request", `${formatName(s.format)} images are made to a file; they cannot be piped (${s.name})`, { field: "strategy" });
  return s.format;
}
