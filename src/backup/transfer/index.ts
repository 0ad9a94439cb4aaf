// Every backup transfer path, by the registry's BackupPath: a missing entry fails to compile.
import type { BackupPath } from "../../strategies/registry.ts";
import type { BackupTransfer } from "./backup-transfer.ts";
import { chunkedTransfer } from "./chunked.ts";
import { filesTransfer } from "./files.ts";
import { multipartTransfer } from "./multipart.ts";
import { presignedMultipartTransfer } from "./presigned-multipart.ts";
import { presignedPutTransfer } from "./presigned-put.ts";
import { sdkBase64ChunkedTransfer } from "./sdk-base64-chunked.ts";
import { sdkBase64StreamTransfer } from "./sdk-base64-stream.ts";
import { sdkBackupTransfer } from "./sdk-backup.ts";
import { streamTransfer } from "./stream.ts";

export const BACKUP_TRANSFERS: Record<BackupPath, BackupTransfer> = {
  stream: streamTransfer,
  multipart: multipartTransfer,
  "presigned-put": presignedPutTransfer,
  "presigned-multipart": presignedMultipartTransfer,
  "sdk-base64-chunked": sdkBase64ChunkedTransfer,
  "sdk-base64-stream": sdkBase64StreamTransfer,
  chunked: chunkedTransfer,
  files: filesTransfer,
  "sdk-backup": sdkBackupTransfer,
};

export type { BackupTransfer, BackupTransferContext } from "./backup-transfer.ts";
