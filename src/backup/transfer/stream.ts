// stream: the staged archive's raw bytes → FixedLengthStream → one put from the Worker.
import { since } from "../../phases/phase-runner.ts";
import { SnapflowError } from "../../errors.ts";
import type { BackupTransfer } from "./backup-transfer.ts";

export const streamTransfer: BackupTransfer = {
  streamsArchive: false,
  singlePass: true,
  hashedByWorker: false,
  async transfer({ d, agent, archived, key, started }) {
    const r = await agent.readFile(archived.staged!);
    const length = Number(r.headers.get("content-length"));
    if (!Number.isFinite(length) || length !== archived.bytes) throw new SnapflowError("transfer_damaged", `staged archive is ${length} bytes, expected ${archived.bytes}`);
    // The store checks the bytes against the hash the record will keep (R2: put's sha256; S3: x-amz-checksum-sha256).
    await d.store.put(key, r.body!, { length, sha256: archived.sha256!, metadata: { sha256: archived.sha256! } });
    // The staging file is no longer needed; failing to remove it must not fail the backup.
    await agent.deleteFile(archived.staged!).catch(() => {});
    return { ms: since(started), bytes: length, sha256: archived.sha256! };
  },
};
